"""Peak of a running count per group: the sweep behind needed buffers and peak activations.

Both ask "at most how many micro-batches are held at once on each stage": events of +1 (taken)
and -1 (released), sorted by stage and then by position in the stream; the answer is the
largest prefix sum inside each stage's run.
"""

from __future__ import annotations

import numpy as np


def peak_per_group(group: np.ndarray, delta: np.ndarray, num_groups: int) -> list[int]:
    """Largest running sum of ``delta`` within each group; events must be sorted by group, then position."""
    peaks = np.zeros(num_groups, dtype=np.int64)
    if not len(group):
        return peaks.tolist()
    running = np.cumsum(delta)
    starts = np.r_[0, np.nonzero(np.diff(group))[0] + 1]
    before = np.r_[0, running[:-1]][starts]  # the running sum carried in from earlier groups
    local = running - np.repeat(before, np.diff(np.r_[starts, len(running)]))
    peaks[group[starts]] = np.maximum.reduceat(local, starts)
    return peaks.tolist()


__all__ = ["peak_per_group"]
