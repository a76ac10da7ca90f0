"""Pause Python's cyclic garbage collector around bulk object creation.

Two kinds of work make hundreds of thousands of long-lived objects and no garbage cycles worth
a scan, so the collector's repeated passes over the growing heap are pure overhead:

* parsing and matching a 35,000-instruction HLO module (10-20% of the run);
* a child process importing torch_xla, Dynamo or DeepSpeed before its first step: about a
  quarter of the import's CPU (``python -c "import torch, torch_xla"``: 3.7 user-s with the
  collector on, 2.7 with it paused). The explorer starts such children by the dozen (an
  ``xla-run``, a ``compile-probe``, the template a CPU run's ranks are forked from).

Collection resumes when the block ends (:func:`paused_gc`; :func:`frozen_imports` also freezes
what a process's imports made). Reference counting frees as always inside either.
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


@contextmanager
def frozen_imports() -> Iterator[None]:
    """A dedicated process's heavy imports, with the collector paused; what they made is then
    frozen (``gc.freeze``): modules live as long as the process, so no later collection walks
    them again. Without it the first full collection after the block walks the whole heap
    (nothing had counted it as long-lived), and in a process forked afterwards (a rank of the
    template) that walk writes to every page it shares with its parent: copy-on-write of the
    heap in each rank. CPython's documentation gives this recipe for a parent that forks.
    Only for a process started for one job: a notebook kernel's own objects are never frozen."""
    try:
        with paused_gc():
            yield
    finally:
        gc.freeze()


__all__ = ["frozen_imports", "paused_gc"]
