"""A job's time line folded to one lane per stage: what the folded view draws, whatever the ranks.

Each cell is one instruction of one stage in one iteration (stage, iteration, kind,
micro-batch) across the stage's replicas: when it starts (the median over replicas, each rank's
times taken from its own first instruction, so the clock offsets between hosts cancel) and how
long it takes (median, lowest and highest over replicas, and the rank that took longest). A job
of 8,192 ranks folds to as many cells as one replica has instructions: the view's size follows
the pipeline, not the rank count.

Each rank's own lane (its instructions on the same time base) is what a click on an outlier
opens. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.pipeline.analysis.fold import compact_keys, dense_key, grouped
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace


@dataclass(frozen=True, eq=False)
class Lanes:
    """The folded cells as columns (seconds from each rank's first instruction)."""

    stage: np.ndarray
    iteration: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray  # median start over the stage's replicas
    median: np.ndarray  # durations over the replicas
    low: np.ndarray
    high: np.ndarray
    count: np.ndarray  # replicas in the cell
    slowest_rank: np.ndarray

    def __len__(self) -> int:
        return len(self.stage)


@dataclass(frozen=True, eq=False)
class RankLane:
    """One rank's instructions on the folded view's time base."""

    rank: int
    stage: np.ndarray
    iteration: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray
    end: np.ndarray


def own_time(job: JobTrace) -> np.ndarray:
    """Each event's start, in seconds from its rank's first instruction (offsets cancel)."""
    first = np.full(int(job.rank.max()) + 1 if len(job) else 0, np.inf)
    np.minimum.at(first, job.rank, job.start)
    return job.start - first[job.rank]


def lanes(job: JobTrace) -> Lanes:
    """The job folded by (stage, iteration, kind, micro-batch): see the module docstring."""
    if not len(job):
        empty = np.zeros(0)
        return Lanes(
            *(empty.astype(np.int64),) * 4,
            *(empty,) * 4,
            empty.astype(np.int64),
            empty.astype(np.int64),
        )
    mb = job.microbatch.astype(np.int64) + 1  # -1 (no micro-batch) becomes 0
    iters = int(job.iteration.max()) + 1
    key, total = dense_key(
        (job.stage, job.layout.stages),
        (job.iteration, iters),
        (job.kind, len(Kind)),
        (mb, int(mb.max()) + 1),
    )
    present, group = compact_keys(key, total)
    g = len(present)
    dur = job.end - job.start
    spread = grouped(group, dur, g)
    starts = grouped(group, own_time(job), g)
    n_mb = int(mb.max()) + 1
    return Lanes(
        stage=present // (iters * len(Kind) * n_mb),
        iteration=(present // (len(Kind) * n_mb)) % iters,
        kind=(present // n_mb) % len(Kind),
        microbatch=present % n_mb - 1,
        start=starts.median,
        median=spread.median,
        low=spread.low,
        high=spread.high,
        count=np.bincount(group, minlength=g),
        slowest_rank=job.rank[spread.highest],
    )


def rank_lane(job: JobTrace, rank: int) -> RankLane:
    """``rank``'s own instructions, on the folded view's time base (empty if the job has none)."""
    mine = job.rank == rank
    own = job.start[mine]
    start = own - own.min() if len(own) else own  # own_time for one rank: not the whole job's
    return RankLane(
        rank,
        job.stage[mine],
        job.iteration[mine],
        job.kind[mine],
        job.microbatch[mine],
        start,
        start + (job.end - job.start)[mine],
    )


__all__ = ["Lanes", "RankLane", "lanes", "own_time", "rank_lane"]
