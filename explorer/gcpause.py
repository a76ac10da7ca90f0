"""Pause Python's cyclic garbage collector around bulk object creation.

Two kinds of work make hundreds of thousands of long-lived objects and no garbage cycles worth
a scan, so the collector's repeated passes over the growing heap are pure overhead:

* parsing and matching a 35,000-instruction HLO module (10-20% of the run);
* a child process importing torch_xla, Dynamo or DeepSpeed before its first step: about a
  quarter of the import's CPU (``python -c "import torch, torch_xla"``: 3.7 user-s with the
  collector on, 2.7 with it paused). The explorer starts such children by the dozen (an
  ``xla-run``, a ``compile-probe``, the template a CPU run's ranks are forked from).

Collection resumes, and runs, when the block ends. Reference counting frees as always inside it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def paused_gc() -> Iterator[None]:
    """Disable the cyclic collector inside the block if it was enabled."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # What the block made is long-lived: move it to the oldest generation without the
            # full scan that the first allocation after re-enabling would otherwise start.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


__all__ = ["paused_gc"]
