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

from types import ModuleType
from typing import Optional

from explorer.compiled import NO_KERNELS, Kernels, load

#: The version of the arguments and meanings this side expects of ``_kernels.c``: a module built
#: from an older source (an editable install keeps its last build) is not used.
VERSION = 1
_NAME = "explorer.xla.hlo._kernels"
_KERNELS = Kernels(_NAME, VERSION)
#: The compiled module, or None where it is not built (``make test`` requires it).
compiled = _KERNELS.compiled
#: Inside, the Python versions run (the benchmarks time both in one run; the tests compare).
disabled = _KERNELS.disabled


def _load() -> Optional[ModuleType]:
    """The module as loading it now would find it (``EXPLORER_NO_KERNELS`` read again)."""
    return load(_NAME, VERSION)


__all__ = ["NO_KERNELS", "VERSION", "compiled", "disabled"]
