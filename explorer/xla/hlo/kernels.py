"""The HLO diff's compiled loops (``_kernels.c``), where they are built and of this version.

``explorer hlo-diff A B`` on two 35,000-instruction modules spent most of its time in loops
that do a little work per instruction: reading each entry line, numbering operands, building
the self and subgraph keys, and matching the two graphs pass by pass. Python pays its call and
object overhead on every step of those; the C versions (``scan_body``, ``Scan.build``,
``match``) do the same steps in the same order.

The Python versions stay beside their callers (:func:`.flat_graph.flat_graph`,
:func:`.matcher.match`): the oracle the tests compare with, answer for answer, and the fallback
where no C compiler built the module (the install goes on without it).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, Optional

#: The version of the arguments and meanings this side expects of ``_kernels.c``: a module built
#: from an older source (an editable install keeps its last build) is not used.
VERSION = 1

#: Set (to anything but "" or "0") to run the Python versions: a way to rule the C out when an
#: answer looks wrong, and what a machine without a C compiler runs. The same variable turns
#: off the schedule checker's compiled loops.
NO_KERNELS = "EXPLORER_NO_KERNELS"


def _load() -> Optional[ModuleType]:
    if os.environ.get(NO_KERNELS, "") not in ("", "0"):
        return None
    try:
        import explorer.xla.hlo._kernels as _kernels  # type: ignore[import-not-found]
    except ImportError:
        return None
    return _kernels if getattr(_kernels, "VERSION", None) == VERSION else None


_MODULE = _load()


def compiled() -> Optional[ModuleType]:
    """The compiled module, or None where it is not built (``make test`` requires it)."""
    return _MODULE


@contextmanager
def disabled() -> Iterator[None]:
    """Inside, the Python versions run (the benchmarks time both in one run; the tests compare)."""
    global _MODULE
    kept, _MODULE = _MODULE, None
    try:
        yield
    finally:
        _MODULE = kept


__all__ = ["NO_KERNELS", "VERSION", "compiled", "disabled"]
