"""Each rank's clock offset, bounded from causality: a receive cannot end before its send began.

Ranks on different hosts time their instructions on different clocks: rank ``b``'s times read
``off_b`` later than the truth. A message from ``a`` to ``b`` began (its send's start) before it
arrived (its receive's end), so ``end_b - off_b >= start_a - off_a``, that is

    off_b - off_a <= end_b - start_a        (the message's *slack*)

Every message bounds one difference from above; a message the other way bounds it from below.
Over all messages these are difference constraints, and the tightest bounds of each rank's
offset relative to a reference rank are shortest paths (Floyd-Warshall over each replica's
pipeline ranks, all replicas at once in numpy): ``off_v - off_ref`` lies in
``[-D[v, ref], D[ref, v]]``. A bound is infinite where no chain of messages gives one (a rank
that only ever sends to the reference is bounded on one side): said, never guessed. The
estimate is the middle of the bounds; the transfer time of each message is what its slack leaves
once the offsets are taken out, so skew and transfer time are told apart.

The reference of each replica is its first rank (``replica * P``): replicas exchange no
pipeline messages, so their clocks are not bounded relative to each other by these lines. A cycle
of constraints with a negative sum means no offsets at all explain the times (a clock that jumped
or drifted during the run, or lines of different runs): that replica's offsets are not given; the
two ranks whose messages both ways miss causality most are named, with by how much.

Messages are paired by (replica, sending stage, receiving stage, iteration, micro-batch,
direction); pure numpy, no object per event.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace

#: Constraints may contradict by this much (seconds) from float rounding alone.
_TOLERANCE_S = 1e-9


@dataclass(frozen=True)
class Contradiction:
    """Times no offsets explain: the two ranks whose messages miss causality most, by how much."""

    miss_s: float  # NaN: only a cycle through more ranks misses
    ranks: tuple[int, ...]

    def sentence(self, replica: int) -> str:
        why = "a clock that jumped or drifted during the run, or lines of different runs"
        if not self.ranks:
            return f"replica {replica}: no offsets explain its times (a cycle of messages misses causality: {why})"
        a, b = self.ranks
        return (
            f"replica {replica}: no offsets explain its times: the messages between ranks {a} and "
            f"{b} miss causality by {self.miss_s * 1e3:.3f} ms ({why})"
        )


@dataclass(frozen=True, eq=False)
class Clocks:
    """Every rank's offset relative to its replica's first rank, with bounds (seconds)."""

    low: np.ndarray  # per rank: off_rank - off_reference >= low (-inf: no bound; NaN: contradicted)
    high: (
        np.ndarray
    )  # per rank: off_rank - off_reference <= high (+inf: no bound; NaN: contradicted)
    reference: np.ndarray  # per rank: the rank its offset is relative to
    messages: int  # messages paired across two ranks
    #: Replicas whose times no offsets explain, with the two ranks that miss most.
    contradicted: dict[int, Contradiction]

    @property
    def estimate(self) -> np.ndarray:
        """The middle of each rank's bounds (NaN where a side is unbounded or contradicted)."""
        with np.errstate(invalid="ignore"):  # inf + -inf: unbounded, NaN below
            mid = (self.low + self.high) / 2
        return np.where(np.isfinite(self.low) & np.isfinite(self.high), mid, np.nan)

    @property
    def width(self) -> np.ndarray:
        return self.high - self.low

    def bounded(self) -> np.ndarray:
        """Ranks other than a reference with both bounds finite."""
        return np.flatnonzero(
            np.isfinite(self.low) & np.isfinite(self.high) & (self.reference != self._ranks())
        )

    def unbounded(self) -> np.ndarray:
        """Ranks other than a reference that the messages bound on one side at most."""
        open_side = ~(np.isfinite(self.low) & np.isfinite(self.high)) & ~np.isnan(self.low)
        return np.flatnonzero(open_side & (self.reference != self._ranks()))

    def _ranks(self) -> np.ndarray:
        return np.arange(len(self.low))

    def sentences(self) -> list[str]:
        """What the clocks say, in a few lines (the report's ``clocks:`` section)."""
        lines = [
            f"clocks: bounded from {self.messages:,} messages (a receive ends after its send "
            "began), each rank relative to its replica's first rank; replicas exchange no "
            "messages here, so they are not bounded relative to each other"
        ]
        bounded, est = self.bounded(), self.estimate
        if len(bounded):
            widths = self.width[bounded]
            far = int(bounded[np.argmax(np.abs(est[bounded]))])
            lines.append(
                f"  {len(bounded):,} ranks bounded: median width {np.median(widths) * 1e3:.3f} ms, "
                f"widest {widths.max() * 1e3:.3f} ms (rank {int(bounded[np.argmax(widths)])})"
            )
            lines.append(
                f"  largest skew: rank {far}'s clock reads {_ms(est[far])} against rank "
                f"{int(self.reference[far])}'s (bounds {_ms(self.low[far])} to {_ms(self.high[far])})"
            )
        unbounded = self.unbounded()
        if len(unbounded):
            listed = ", ".join(str(int(r)) for r in unbounded[:10])
            more = f" and {len(unbounded) - 10} more" if len(unbounded) > 10 else ""
            lines.append(
                f"  not bounded on both sides (no message chain each way): ranks {listed}{more}"
            )
        for replica, contradiction in sorted(self.contradicted.items())[:10]:
            lines.append(f"  {contradiction.sentence(replica)}")
        if len(self.contradicted) > 10:
            lines.append(
                f"  ... and {len(self.contradicted) - 10} more replicas (--json lists them)"
            )
        return lines

    def to_dict(self) -> dict:
        def num(x: float) -> object:
            return None if not math.isfinite(x) else round(float(x), 9)

        return {
            "messages": self.messages,
            "relative_to": "each replica's first rank",
            "offsets": [
                {
                    "rank": r,
                    "reference": int(self.reference[r]),
                    "low_s": num(self.low[r]),
                    "high_s": num(self.high[r]),
                    "estimate_s": num(self.estimate[r]),
                }
                for r in range(len(self.low))
            ],
            "contradicted": [
                {"replica": k, "ranks": list(c.ranks), "miss_s": num(c.miss_s)}
                for k, c in sorted(self.contradicted.items())
            ],
        }


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:+.3f} ms" if math.isfinite(seconds) else "unbounded"


def message_pairs(job: JobTrace) -> tuple[np.ndarray, np.ndarray]:
    """Every message paired, as indices into the job's columns: (its send, its receive)."""
    transfers = (Kind.SEND_ACTIVATION, Kind.RECV_ACTIVATION, Kind.SEND_GRAD, Kind.RECV_GRAD)
    at = np.flatnonzero(np.isin(job.kind, [int(k) for k in transfers]))  # the rest never pairs
    kind, stage = job.kind[at], job.stage[at].astype(np.int64)
    sends = (kind == int(Kind.SEND_ACTIVATION)) | (kind == int(Kind.SEND_GRAD))
    grad = ((kind == int(Kind.SEND_GRAD)) | (kind == int(Kind.RECV_GRAD))).astype(np.int64)
    # the sending stage: a receive's peer is the stage before (activations) or after (gradients)
    src = np.where(sends, stage, stage + 2 * grad - 1)
    rank, iteration, microbatch = job.rank[at], job.iteration[at], job.microbatch[at]
    key = _key(
        (job.layout.replica_of(rank), job.layout.replicas),
        (src + 1, job.layout.stages + 2),
        (iteration, int(iteration.max(initial=0)) + 1),
        (microbatch + 1, int(microbatch.max(initial=0)) + 2),
        (grad, 2),
    )
    send_at, recv_at = np.flatnonzero(sends), np.flatnonzero(~sends)
    send_keys, first = np.unique(key[send_at], return_index=True)
    if not len(send_keys) or not len(recv_at):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    send_at = send_at[first]
    pos = np.searchsorted(send_keys, key[recv_at]).clip(max=len(send_keys) - 1)
    hit = send_keys[pos] == key[recv_at]
    return at[send_at[pos[hit]]], at[recv_at[hit]]


def _messages(job: JobTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every message paired: (sending rank, receiving rank, slack = recv end - send start)."""
    s, r = message_pairs(job)
    a, b = job.rank[s].astype(np.int64), job.rank[r].astype(np.int64)
    slack = job.end[r] - job.start[s]
    # one rank's stages share its clock; a NaN time says nothing
    kept = (a != b) & np.isfinite(slack)
    return a[kept], b[kept], slack[kept]


def _contradiction(pairs: np.ndarray, ranks: np.ndarray) -> Contradiction:
    """The two ranks whose messages both ways miss causality most, and by how much (``ranks``:
    the replica's rank at each pipeline place); a longer cycle alone has no amount here
    (Floyd-Warshall compounds it)."""
    i, j = np.unravel_index(int(np.argmin(pairs)), pairs.shape)
    if pairs[i, j] >= -_TOLERANCE_S:
        return Contradiction(math.nan, ())
    pair = sorted((int(ranks[i]), int(ranks[j])))
    return Contradiction(float(-pairs[i, j]), (pair[0], pair[1]))


def _key(*columns: tuple[np.ndarray, int]) -> np.ndarray:
    """One int64 per event from (column, size) pairs; refused where the sizes overflow it."""
    if math.prod(size for _, size in columns) >= 2**62:
        raise ValueError("too many replicas x stages x iterations x micro-batches to pair")
    key = np.zeros(len(columns[0][0]), dtype=np.int64)
    for column, size in columns:
        key = key * size + column.astype(np.int64)
    return key


def clocks(job: JobTrace) -> Clocks:
    """Every rank's offset bounds (see the module docstring)."""
    lay = job.layout
    p, replicas = lay.pipeline_ranks, lay.replicas
    ranks = replicas * p
    a, b, slack = _messages(job)
    rep_a, rep_b = lay.replica_of(a), lay.replica_of(b)
    # the tightest bound per directed pair, as a (replica, P, P) matrix of slacks
    dist = np.full((replicas, p, p), np.inf)
    dist[:, np.arange(p), np.arange(p)] = 0.0
    same = rep_a == rep_b
    place = (rep_a[same], lay.local_of(a[same]), lay.local_of(b[same]))
    np.minimum.at(dist, place, slack[same])
    pairs = dist + dist.transpose(0, 2, 1)  # each two ranks' messages both ways: a 2-cycle
    for k in range(p):  # Floyd-Warshall, every replica at once
        np.minimum(dist, dist[:, :, k : k + 1] + dist[:, k : k + 1, :], out=dist)
    cycles = np.diagonal(dist, axis1=1, axis2=2).min(axis=1)
    contradicted = {
        int(r): _contradiction(pairs[r], lay.rank_at(int(r), np.arange(p)))
        for r in np.flatnonzero(cycles < -_TOLERANCE_S)
    }
    # (replica, place) back to ranks, in rank order
    at = lay.rank_at(np.repeat(np.arange(replicas), p), np.tile(np.arange(p), replicas))
    high, low = np.empty(ranks), np.empty(ranks)
    high[at] = dist[:, 0, :].reshape(ranks)  # off_v - off_ref <= D[ref, v]
    low[at] = -dist[:, :, 0].reshape(ranks)  # off_v - off_ref >= -D[v, ref]
    for r in contradicted:  # no offsets explain them: none is given
        mine = lay.rank_at(r, np.arange(p))
        low[mine], high[mine] = np.nan, np.nan
    reference = lay.rank_at(lay.replica_of(np.arange(ranks)), 0)
    return Clocks(low, high, reference, int(len(slack)), contradicted)


__all__ = ["Clocks", "Contradiction", "clocks", "message_pairs"]
