"""A job folded by stage: per instruction the band across replicas, and the outlier ranks named.

The ranks of one stage run the same instructions on different data; in a healthy job their
durations differ by noise. So each instruction (stage, kind, micro-batch, iteration) has a
*cell* of durations, one per replica, and the cell's median is what the stage takes. A rank's
**ratio** is its duration over its cell's median.

The outlier rule, median/MAD over replicas, on ``x = log(ratio)``:

1. a rank's value for a kind in an iteration is the median of ``x`` over its micro-batches
   (one slow micro-batch does not make a slow rank);
2. the stage's noise for that kind is ``s = 1.4826 * MAD`` of those values over every replica
   and iteration (a few stragglers do not move it);
3. the rank is slow in that iteration when its value is above ``max(log(min_ratio), k * s)``
   (defaults: 1.25x and 6 deviations);
4. it is **named** when it is slow in at least ``min_iterations`` consecutive iterations (2, or
   every iteration when there are fewer): "from iteration k on" when the run reaches the last
   iteration, "in iterations k to j" otherwise.

A receive that ends later (a slow link) shows as a receive slower than its stage's: it is named
with the time it adds and the rank it receives from. Pure numpy: no per-event objects.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Optional

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace

MIN_RATIO = 1.25
DEVIATIONS = 6.0
MIN_ITERATIONS = 2
_MAD_SCALE = 1.4826
_WORDS = {
    Kind.LOAD: "loads",
    Kind.FORWARD: "forward passes",
    Kind.BACKWARD: "backward passes",
    Kind.BACKWARD_INPUT: "input-gradient passes",
    Kind.BACKWARD_WEIGHT: "weight-gradient passes",
    Kind.SEND_ACTIVATION: "activation sends",
    Kind.RECV_ACTIVATION: "activation receives",
    Kind.SEND_GRAD: "gradient sends",
    Kind.RECV_GRAD: "gradient receives",
    Kind.REDUCE_GRADS: "gradient reductions",
    Kind.REDUCE_TIED_GRADS: "tied-gradient reductions",
    Kind.OPTIMIZER_STEP: "optimizer steps",
}
_TRANSFERS = (Kind.SEND_ACTIVATION, Kind.RECV_ACTIVATION, Kind.SEND_GRAD, Kind.RECV_GRAD)


@dataclass(frozen=True)
class Rule:
    """The outlier rule's thresholds (see the module docstring)."""

    min_ratio: float = MIN_RATIO
    deviations: float = DEVIATIONS
    min_iterations: int = MIN_ITERATIONS

    def sentence(self) -> str:
        return (
            f"a rank is named when, for one instruction kind, the median over its micro-batches of "
            f"its duration over the stage's median (across replicas, same instruction and iteration) "
            f"is above {self.min_ratio:g}x and {self.deviations:g} robust deviations "
            f"(1.4826 MAD over the stage's replicas) in {self.min_iterations} or more iterations in a row"
        )


@dataclass(frozen=True)
class Outlier:
    """A rank whose instructions of one kind are slower than its stage's, iteration after iteration."""

    rank: int
    stage: int
    replica: int
    kind: Kind
    first_iteration: int
    last_iteration: int
    to_the_end: bool
    ratio: float
    added_s: float
    peer: Optional[int] = None

    def sentence(self) -> str:
        when = (
            f"from iteration {self.first_iteration} on"
            if self.to_the_end
            else f"in iterations {self.first_iteration} to {self.last_iteration}"
        )
        words = _WORDS.get(self.kind, self.kind.name.lower())
        where = f"rank {self.rank}, stage {self.stage} replica {self.replica}"
        if self.kind in _TRANSFERS:
            link = f": the link from rank {self.peer}" if self.peer is not None else ""
            if self.kind in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD) and self.peer is not None:
                link = f": the link to rank {self.peer}"
            return (
                f"{where}: its {words} end {self.added_s * 1e3:.2f} ms later than the stage median "
                f"({self.ratio:.1f}x) {when}{link}"
            )
        return f"{where}: its {words} take {self.ratio:.2f}x the stage median {when}"

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind.code, "sentence": self.sentence()}


@dataclass(frozen=True)
class Band:
    """One instruction of one stage across its replicas (every iteration): seconds."""

    stage: int
    kind: Kind
    microbatch: int
    count: int
    low: float
    median: float
    high: float
    slowest_rank: int

    def to_dict(self) -> dict:
        return {**asdict(self), "kind": self.kind.code}


@dataclass(frozen=True)
class Fold:
    """The folded job: its bands and its named outliers, under ``rule``."""

    bands: tuple[Band, ...]
    outliers: tuple[Outlier, ...]
    rule: Rule


@dataclass(frozen=True, eq=False)
class Grouped:
    """Per group: lowest, median and highest value, and the index of the highest (-1: empty)."""

    low: np.ndarray
    median: np.ndarray
    high: np.ndarray
    highest: np.ndarray


def grouped(group: np.ndarray, values: np.ndarray, groups: int) -> Grouped:
    """The spread of ``values`` in each group ``0..groups-1`` (NaN for an empty group): one sort."""
    order = np.lexsort((values, group))
    counts = np.bincount(group, minlength=groups)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    v = values[order]
    has = counts > 0
    first, last = starts[has], starts[has] + counts[has] - 1
    out = Grouped(
        low=np.full(groups, np.nan),
        median=np.full(groups, np.nan),
        high=np.full(groups, np.nan),
        highest=np.full(groups, -1),
    )
    out.low[has] = v[first]
    out.high[has] = v[last]
    out.median[has] = (v[first + (counts[has] - 1) // 2] + v[first + counts[has] // 2]) / 2
    out.highest[has] = order[last]
    return out


def grouped_median(group: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """The median of ``values`` in each group (NaN for an empty group)."""
    return grouped(group, values, groups).median


def dense_key(*columns: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
    """A dense group id from (column, size) pairs (each column in ``0..size-1``)."""
    key = np.zeros(len(columns[0][0]), dtype=np.int64)
    total = 1
    for col, size in columns:
        key = key * size + col.astype(np.int64)
        total *= size
    return key, total


def compact_keys(key: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """(the keys present, each event's index among them): a bincount when the key space is
    small beside the events, else a sort (``np.unique``)."""
    if total > 4 * len(key) + 1024:
        return np.unique(key, return_inverse=True)
    present = np.flatnonzero(np.bincount(key, minlength=total))
    index = np.full(total, -1, dtype=np.int64)
    index[present] = np.arange(len(present))
    return present, index[key]


def _bands(job: JobTrace, dur: np.ndarray) -> tuple[Band, ...]:
    mb = job.microbatch.astype(np.int64) + 1
    n_mb = int(mb.max()) + 1
    key, total = dense_key((job.stage, job.layout.stages), (job.kind, len(Kind)), (mb, n_mb))
    present, group = compact_keys(key, total)
    g = len(present)
    spread = grouped(group, dur, g)
    counts = np.bincount(group, minlength=g)
    slowest = job.rank[spread.highest]
    out = []
    for i, k in enumerate(present.tolist()):
        k, m = divmod(k, n_mb)
        s, kind = divmod(k, len(Kind))
        out.append(
            Band(
                s,
                Kind(kind),
                m - 1,
                int(counts[i]),
                float(spread.low[i]),
                float(spread.median[i]),
                float(spread.high[i]),
                int(slowest[i]),
            )
        )
    return tuple(out)


def _runs(slow: np.ndarray, iters: np.ndarray, need: int) -> Optional[tuple[int, int]]:
    """The first run of ``need`` or more consecutive slow iterations: (first, last) iteration."""
    start: Optional[int] = None
    prev: Optional[int] = None
    found: Optional[tuple[int, int]] = None
    for it, s in zip(iters.tolist(), slow.tolist()):
        if not s or (start is not None and prev is not None and it != prev + 1):
            if found is not None:
                return found
            start = it if s else None
        elif start is None:
            start = it
        prev = it
        if start is not None and it - start + 1 >= need:
            found = (start, it)
    return found


def _peer(job: JobTrace, rank: int, stage: int, kind: Kind) -> Optional[int]:
    """The rank at the other end of a transfer (same replica, the neighbouring stage)."""
    other = stage - 1 if kind in (Kind.RECV_ACTIVATION, Kind.SEND_GRAD) else stage + 1
    to_rank = job.layout.stage_to_rank
    if not 0 <= other < len(to_rank):
        return None
    lay = job.layout
    return int(lay.rank_at(lay.replica_of(rank), to_rank[other]))


def _outliers(job: JobTrace, dur: np.ndarray, rule: Rule) -> tuple[Outlier, ...]:
    it = job.iteration.astype(np.int64) - int(job.iteration.min())
    n_it = int(it.max()) + 1
    mb = job.microbatch.astype(np.int64) + 1
    n_mb = int(mb.max()) + 1
    stages, kinds = job.layout.stages, len(Kind)
    cell, n_cell = dense_key((job.stage, stages), (job.kind, kinds), (mb, n_mb), (it, n_it))
    cell_med = grouped_median(cell, dur, n_cell)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.log(np.maximum(dur, 1e-12) / np.maximum(cell_med[cell], 1e-12))
    ranks = int(job.rank.max()) + 1
    per, n_per = dense_key((job.rank, ranks), (job.stage, stages), (job.kind, kinds), (it, n_it))
    present, group = compact_keys(per, n_per)
    value = grouped_median(group, x, len(present))
    rest, g_it = np.divmod(present, n_it)
    rest, g_kind = np.divmod(rest, kinds)
    g_rank, g_stage = np.divmod(rest, stages)
    out: list[Outlier] = []
    sk = g_stage * kinds + g_kind
    for key in np.unique(sk).tolist():
        sel = np.flatnonzero(sk == key)
        v = value[sel]
        spread = _MAD_SCALE * float(np.median(np.abs(v - np.median(v))))
        threshold = max(math.log(rule.min_ratio), rule.deviations * spread)
        slow = v > threshold
        if not slow.any():
            continue
        need = min(rule.min_iterations, n_it)
        stage, kind = divmod(key, kinds)
        for rank in np.unique(g_rank[sel[slow]]).tolist():
            mine = sel[g_rank[sel] == rank]
            order = np.argsort(g_it[mine])
            mine = mine[order]
            run = _runs(value[mine] > threshold, g_it[mine], need)
            if run is None:
                continue
            first, last = run
            out.append(
                _outlier(job, dur, cell_med[cell], rank, stage, Kind(kind), first, last, n_it)
            )
    return tuple(sorted(out, key=lambda o: (o.stage, o.rank, o.kind)))


def _outlier(
    job: JobTrace,
    dur: np.ndarray,
    median: np.ndarray,
    rank: int,
    stage: int,
    kind: Kind,
    first: int,
    last: int,
    n_it: int,
) -> Outlier:
    it0 = int(job.iteration.min())
    sel = (job.rank == rank) & (job.kind == kind) & (job.stage == stage)
    it = job.iteration[sel] - it0
    sel = np.flatnonzero(sel)[(it >= first) & (it <= last)]
    ratio = float(np.median(dur[sel] / np.maximum(median[sel], 1e-12)))
    added = float(np.median(dur[sel] - median[sel]))
    peer = _peer(job, rank, stage, kind) if kind in _TRANSFERS else None
    replica = int(job.layout.replica_of(rank))
    return Outlier(
        rank, stage, replica, kind, first + it0, last + it0, last == n_it - 1, ratio, added, peer
    )


def fold(job: JobTrace, rule: Rule = Rule()) -> Fold:
    """The job folded by stage: bands per instruction and the outlier ranks (see the module docstring)."""
    dur = (job.end - job.start).astype(np.float64)
    return Fold(_bands(job, dur), _outliers(job, dur, rule), rule)


__all__ = [
    "Band",
    "Fold",
    "Outlier",
    "Rule",
    "compact_keys",
    "dense_key",
    "fold",
    "grouped",
    "grouped_median",
]
