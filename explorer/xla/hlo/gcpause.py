"""Pause Python's cyclic garbage collector around bulk object creation.

Parsing and matching a 35,000-instruction module creates a few hundred thousand small objects
and no reference cycles, so the collector's repeated generation-0/1 scans are pure overhead
(10-20% of the run here). Collection resumes, and runs, when the block ends.
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
