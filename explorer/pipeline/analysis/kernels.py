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

import os
from contextlib import contextmanager
from types import ModuleType
from typing import Iterator, Optional

#: The version of the arguments and meanings this side expects of ``_kernels.c``: a module built
#: from an older source (an editable install keeps its last build) is not used.
VERSION = 4


#: Set (to anything but "" or "0") to run the numpy versions: a way to rule the C out when an
#: answer looks wrong, and what a machine without a C compiler runs.
NO_KERNELS = "EXPLORER_NO_KERNELS"


def _load() -> Optional[ModuleType]:
    if os.environ.get(NO_KERNELS, "") not in ("", "0"):
        return None
    try:
        import explorer.pipeline.analysis._kernels as _kernels  # type: ignore[import-not-found]
    except ImportError:
        return None
    return _kernels if getattr(_kernels, "VERSION", None) == VERSION else None


_MODULE = _load()


def compiled() -> Optional[ModuleType]:
    """The compiled module, or None where it is not built (``make test`` requires it)."""
    return _MODULE


@contextmanager
def disabled() -> Iterator[None]:
    """Inside, the numpy versions run (the benchmarks time both in one run; the tests compare)."""
    global _MODULE
    kept, _MODULE = _MODULE, None
    try:
        yield
    finally:
        _MODULE = kept


__all__ = ["NO_KERNELS", "VERSION", "compiled", "disabled"]
