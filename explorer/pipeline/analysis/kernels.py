"""The checker's compiled loops (``_kernels.c``), where they are built and of this version.

Three loops of the checker are sequential at heart: the timeline (every step starts from the
ends of the steps before it), the buffer check (every read finds the last earlier write of its
buffer) and the needed buffers (each micro-batch holds a buffer from its first event to its
last). numpy does the first as a dozen grid-wide passes and then a handful of calls per step,
the others by sorting every event; at 64 x 1,024 they were about a third of ``check``. The C
versions do the same operations in the same order, without the calls or the sorts.

Each has its numpy version beside its caller (:func:`.timeline._per_step_numpy`,
:func:`.buffers._clean_numpy`, :func:`.buffers._needed_buffers_numpy`): the oracle the tests
compare with bit for bit, and the fallback where no C compiler built the module (the install
goes on without it; the answers are the same).
"""

from __future__ import annotations

from types import ModuleType
from typing import Optional

from explorer.compiled import NO_KERNELS, Kernels, load

#: The version of the arguments and meanings this side expects of ``_kernels.c``: a module built
#: from an older source (an editable install keeps its last build) is not used.
VERSION = 4
_NAME = "explorer.pipeline.analysis._kernels"
_KERNELS = Kernels(_NAME, VERSION)
#: The compiled module, or None where it is not built (``make test`` requires it).
compiled = _KERNELS.compiled
#: Inside, the numpy versions run (the benchmarks time both in one run; the tests compare).
disabled = _KERNELS.disabled


def _load() -> Optional[ModuleType]:
    """The module as loading it now would find it (``EXPLORER_NO_KERNELS`` read again)."""
    return load(_NAME, VERSION)


__all__ = ["NO_KERNELS", "VERSION", "compiled", "disabled"]
