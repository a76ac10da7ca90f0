"""The optional compiled extensions, loaded one way: once, only where built from the source
their Python side expects, and never under ``EXPLORER_NO_KERNELS``.

The schedule checker and the HLO diff each keep their loops in C with the Python (or numpy)
versions beside them as oracle and fallback; each product's ``kernels`` module names its
extension and version, and this is the loading both share.
"""

from __future__ import annotations

import importlib
import os
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, Optional

#: Set (to anything but "" or "0") to run the Python versions everywhere: a way to rule the C
#: out when an answer looks wrong, and what a machine without a C compiler runs.
NO_KERNELS = "EXPLORER_NO_KERNELS"


def load(name: str, version: int) -> Optional[ModuleType]:
    """The extension ``name`` when it is built, of ``version`` (a module built from an older
    source, as an editable install keeps its last build, is not used) and not switched off."""
    if os.environ.get(NO_KERNELS, "") not in ("", "0"):
        return None
    try:
        module = importlib.import_module(name)
    except ImportError:
        return None
    return module if getattr(module, "VERSION", None) == version else None


class Kernels:
    """One extension, loaded at import: :meth:`compiled` gives it (None where not built), and
    inside :meth:`disabled` the Python versions run (the benchmarks time both, the tests compare)."""

    def __init__(self, name: str, version: int) -> None:
        self._module = load(name, version)

    def compiled(self) -> Optional[ModuleType]:
        return self._module

    @contextmanager
    def disabled(self) -> Iterator[None]:
        kept, self._module = self._module, None
        try:
            yield
        finally:
            self._module = kept


__all__ = ["NO_KERNELS", "Kernels", "load"]
