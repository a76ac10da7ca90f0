"""Where the time went, per rank: compute, transfer, waiting for a partner, other work, idle.

A measured bubble of 85 % on CPU/gloo says little by itself; split each exchange into the
part spent *waiting* for the partner to arrive and the part spent *moving* the data, and the
rest of the iteration into compute, bookkeeping (load, reduce, optimizer) and plain idle, and
the reason shows: on a loaded CPU most of the "bubble" is ranks waiting inside receives.

The same function serves the simulation and a measurement, so the two are compared in the
same terms. The partner of an exchange is its matched send or receive (``-1``: none); the
partner is *ready* when its call starts (a blocking send/recv meets then; a batched receive
can complete only once its send was posted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import numpy as np

from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Kind

CATEGORIES = ("compute", "transfer", "waiting", "other", "idle", "stopped")
_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
_P2P = np.array(
    [int(Kind.SEND_ACTIVATION), int(Kind.RECV_ACTIVATION), int(Kind.SEND_GRAD), int(Kind.RECV_GRAD)]
)


@dataclass(frozen=True)
class Breakdown:
    """``seconds[rank][category]`` over ``span`` (from the first start to the last end of any rank)."""

    ranks: tuple[int, ...]
    seconds: tuple[dict, ...]
    span: float
    #: The ranks the caller said stopped early (failed, killed, no end written), as given: the
    #: one that failed last has no time after its end, yet it stopped all the same.
    stopped: tuple[int, ...] = ()

    def share(self, rank_index: int) -> dict:
        """Each category as a share of the span."""
        return {
            k: (v / self.span if self.span > 0 else 0.0)
            for k, v in self.seconds[rank_index].items()
        }

    def sentence(self, unit: str = "") -> str:
        """The largest cost that is not compute, said in words for the rank where it is largest."""
        if not self.ranks or self.span <= 0:
            return ""
        worst = max(
            ("waiting", "transfer", "idle", "other"), key=lambda c: max(s[c] for s in self.seconds)
        )
        # A rank that stopped early idles after its end for a reason the schedule does not give.
        early = [str(r) for r in self.stopped]
        plural = "s" if len(early) > 1 else ""
        stopped = (
            [f"rank{plural} {', '.join(early)} stopped early (failed or ended)"] if early else []
        )
        i = int(np.argmax([s[worst] for s in self.seconds]))
        share = self.share(i)
        why = {
            "waiting": "waiting inside sends and receives for the partner rank to arrive",
            "transfer": "moving data once both ranks are in the exchange",
            "idle": "between instructions, with nothing to run (the schedule's own bubble)",
            "other": "in loads, gradient reductions and the optimizer step",
        }[worst]
        return "; ".join(
            [
                f"rank {self.ranks[i]} spends {share[worst]:.0%} of the iteration {why}; "
                f"compute is {share['compute']:.0%}",
                *stopped,
            ]
        )


def wait_split(
    kind: np.ndarray, start: np.ndarray, end: np.ndarray, partner: np.ndarray
) -> np.ndarray:
    """For each row, the time spent waiting for its partner (0 for compute and unmatched rows)."""
    wait = np.zeros(len(kind))
    p2p = np.isin(kind, _P2P) & (partner >= 0)
    rows = np.nonzero(p2p)[0]
    ready = start[partner[rows]]
    wait[rows] = np.clip(ready - start[rows], 0.0, end[rows] - start[rows])
    return wait


def breakdown(
    rank: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    partner: np.ndarray,
    stopped: Collection[int] = (),
) -> Breakdown:
    """Per rank, seconds (or ticks) of each of :data:`CATEGORIES` over the whole span.

    ``stopped``: ranks that ended before the others (failed, killed, no end written); their
    time after their last instruction is ``stopped``, not ``idle``, so a killed rank is not
    said to sit in the schedule's bubble.
    """
    if not len(rank):
        return Breakdown((), (), 0.0)
    kind = kind.astype(np.int64)
    dur = np.maximum(end - start, 0.0)
    wait = wait_split(kind, start, end, partner)
    lo, hi = float(start.min()), float(end.max())
    # One pass for every rank: each row's time goes to its category, summed per (rank, category).
    ranks, rank_index = np.unique(rank, return_inverse=True)
    compute, p2p = np.isin(kind, _COMPUTE), np.isin(kind, _P2P)
    sums = np.zeros((len(ranks), 4))
    for col, weights in enumerate(
        (
            np.where(compute, dur, 0.0),
            np.where(p2p, dur - wait, 0.0),
            np.where(p2p, wait, 0.0),
            np.where(~compute & ~p2p, dur, 0.0),
        )
    ):
        sums[:, col] = np.bincount(rank_index, weights=weights, minlength=len(ranks))
    last_end = np.full(len(ranks), lo)
    np.maximum.at(last_end, rank_index, end)
    out = []
    for r, last, (c, t, w, o) in zip(ranks.tolist(), last_end.tolist(), sums.tolist()):
        after = max(hi - last, 0.0) if r in stopped else 0.0
        out.append(
            {
                "compute": c,
                "transfer": t,
                "waiting": w,
                "other": o,
                "idle": max((hi - lo) - c - t - w - o - after, 0.0),
                "stopped": after,
            }
        )
    return Breakdown(
        tuple(int(r) for r in ranks),
        tuple(out),
        hi - lo,
        tuple(int(r) for r in ranks.tolist() if r in stopped),
    )


def pair_by_key(stage: np.ndarray, kind: np.ndarray, microbatch: np.ndarray) -> np.ndarray:
    """Partners in a measurement, which has no matching: a send of micro-batch m from stage s
    meets the receive of m on the stage it goes to (s+1 for activations, s-1 for gradients)."""
    kind = kind.astype(np.int64)
    partner = np.full(len(kind), -1, dtype=np.int64)
    sends = {}
    for i in np.nonzero(np.isin(kind, [int(Kind.SEND_ACTIVATION), int(Kind.SEND_GRAD)]))[
        0
    ].tolist():
        grad = kind[i] == Kind.SEND_GRAD
        sends[(int(stage[i]) + (-1 if grad else 1), bool(grad), int(microbatch[i]))] = i
    for i in np.nonzero(np.isin(kind, [int(Kind.RECV_ACTIVATION), int(Kind.RECV_GRAD)]))[
        0
    ].tolist():
        j = sends.get((int(stage[i]), bool(kind[i] == Kind.RECV_GRAD), int(microbatch[i])))
        if j is not None:
            partner[i], partner[j] = j, i
    return partner


__all__ = ["CATEGORIES", "Breakdown", "wait_split", "breakdown", "pair_by_key"]
