"""Buffer occupancy: which micro-batch each buffer slot holds, from when to when.

The buffer-lifetime view needs intervals, not findings: on stage ``s``, buffer ``b`` holds
micro-batch ``m`` from the first instruction that writes it there (load, receive or forward)
to the last one that reads it (send, backward, weight gradient). The interval is split at
the backward: before it the slot holds the *activation*, after it the *gradient* that
``SendGrad`` (or a later ``BackwardWeight``) still needs. The split matters because the seed
bug overwrites a slot in its gradient phase, after the activation looks finished.

Positions are in *sub-steps*: instruction ``k`` of the ``n`` a rank runs in step ``t`` spans
``[t + k/n, t + (k+1)/n)``. Whole steps would hide the bug, which lives in the order inside
one step (``RecvActivation`` before ``SendGrad``): with sub-steps the two occupancies of the
slot visibly overlap under the legacy order and merely touch under the fixed one.

Pure numpy; the intervals follow the same rules as :func:`explorer.pipeline.analysis.needed_buffers`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.pipeline.schedules.instructions import BUFFER_KINDS, Kind
from explorer.pipeline.schedules.schedule import Schedule

_BUFFER_KINDS = np.array(sorted(int(k) for k in BUFFER_KINDS))
_BACKWARD_KINDS = np.array([int(Kind.BACKWARD), int(Kind.BACKWARD_INPUT)])


@dataclass(frozen=True)
class Occupancy:
    """One row per (stage, buffer, micro-batch) occupancy, as parallel columns.

    ``start <= split <= end``: ``[start, split)`` holds the activation, ``[split, end)`` the
    gradient (``split == end`` when the stage never runs a backward for it).
    """

    stage: np.ndarray
    buffer: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray
    split: np.ndarray
    end: np.ndarray

    def __len__(self) -> int:
        return len(self.stage)

    def of_stage(self, stage: int) -> "Occupancy":
        """Only the rows of one stage (the per-stage view)."""
        keep = self.stage == stage
        return Occupancy(*(getattr(self, f)[keep] for f in self.__dataclass_fields__))


def substep_positions(schedule: Schedule) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every row in sub-step units (see the module docstring)."""
    n = len(schedule)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    rank, step = schedule.rank, schedule.step
    new_group = np.r_[True, (rank[1:] != rank[:-1]) | (step[1:] != step[:-1])]
    group_id = np.cumsum(new_group) - 1
    first = np.nonzero(new_group)[0]
    size = np.bincount(group_id).astype(float)
    k = np.arange(n) - first[group_id]
    width = 1.0 / size[group_id]
    start = step + k * width
    return start, start + width


def _unique_triples(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``(a, b, c)`` rows in lexicographic order, and each input row's index in them.

    What ``np.unique(..., axis=0)`` answers, without its sort of a row-sized void type (0.9 s of
    the 64 x 1,024 explorer's 2.6 s): non-negative triples are packed into one int64 key whose
    order is the rows' order, and only the keys are sorted. Sizes that could not be packed fall
    back to the row sort.
    """
    nb, nc = int(b.max()) + 1, int(c.max()) + 1
    if min(int(a.min()), int(b.min()), int(c.min())) < 0 or (int(a.max()) + 1) * nb * nc >= 2**62:
        uniq, inverse = np.unique(np.stack([a, b, c], axis=1), axis=0, return_inverse=True)
        return uniq, inverse.reshape(-1)
    keys, inverse = np.unique((a * nb + b) * nc + c, return_inverse=True)
    return np.stack([keys // (nb * nc), keys // nc % nb, keys % nc], axis=1), inverse.reshape(-1)


def occupancy(schedule: Schedule) -> Occupancy:
    """Every buffer occupancy of ``schedule``, sorted by stage, buffer, then start."""
    start, end = substep_positions(schedule)
    rows = np.nonzero(
        np.isin(schedule.kind, _BUFFER_KINDS) & (schedule.buffer >= 0) & (schedule.microbatch >= 0)
    )[0]
    if not len(rows):
        empty = np.zeros(0, dtype=np.int64)
        return Occupancy(empty, empty, empty, np.zeros(0), np.zeros(0), np.zeros(0))
    st = schedule.stage[rows].astype(np.int64)
    buf = schedule.buffer[rows].astype(np.int64)
    mb = schedule.microbatch[rows].astype(np.int64)
    uniq, inverse = _unique_triples(st, buf, mb)
    first = np.full(len(uniq), np.inf)
    last = np.full(len(uniq), -np.inf)
    np.minimum.at(first, inverse, start[rows])
    np.maximum.at(last, inverse, end[rows])
    split = last.copy()
    back = np.isin(schedule.kind[rows], _BACKWARD_KINDS)
    np.minimum.at(split, inverse[back], start[rows][back])
    order = np.lexsort((first, uniq[:, 1], uniq[:, 0]))
    return Occupancy(
        stage=uniq[order, 0],
        buffer=uniq[order, 1],
        microbatch=uniq[order, 2],
        start=first[order],
        split=split[order],
        end=last[order],
    )


__all__ = ["Occupancy", "substep_positions", "occupancy"]
