"""Memory per rank over (simulated) time: activations held and receive buffers in use, with the peak.

A rank holds a micro-batch's activations on a stage from the end of its forward until the
backward that no longer needs them ends (the full backward, or the weight part ``W`` when the
backward is split, since ``W`` still reads them). A receive buffer is in use from the start of
the receive until the compute that consumes it ends (an activation until the forward, a
gradient until the backward). Counted in micro-batch units per rank (a rank with several stages
adds them up), because the schedule knows no tensor sizes; multiply by one stage's activation
size for bytes.

Per rank the result is a step function (``times``, ``activations``, ``receive_buffers``) and
its peak: the largest total and when it is first reached, with the instruction that reached it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.analysis.timeline import Timeline
from explorer.schedules.instructions import Kind
from explorer.schedules.schedule import Schedule


@dataclass(frozen=True)
class RankMemory:
    """One rank's held activations and receive buffers over time (micro-batch units)."""

    rank: int
    times: tuple[float, ...]
    activations: tuple[int, ...]
    receive_buffers: tuple[int, ...]
    peak: int
    peak_time: float
    peak_instruction: str

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "times": list(self.times),
            "activations": list(self.activations),
            "receive_buffers": list(self.receive_buffers),
            "peak": self.peak,
            "peak_time": self.peak_time,
            "peak_instruction": self.peak_instruction,
        }

    def describe(self, unit: str = "ticks") -> str:
        return (
            f"rank {self.rank} peaks at {self.peak} micro-batches of memory (activations + receive "
            f"buffers) at {self.peak_time:g} {unit}, after {self.peak_instruction}"
        )


#: Points per rank kept in the series, evenly spaced (the peak is always exact).
MAX_POINTS = 128


#: Each event's change to (activations held, receive buffers in use), by its code.
_D_ACT = np.array([-1, 0, 1, 0], dtype=np.int64)
_D_RECV = np.array([0, -1, 0, 1], dtype=np.int64)


def memory_over_time(schedule: Schedule, timeline: Timeline) -> list[RankMemory]:
    """Per rank, the step functions and the peak (see the module docstring). Vectorised: a 64 x 1024
    schedule has half a million rows."""
    kind = schedule.kind
    mb = schedule.microbatch
    rows = np.arange(len(kind))
    m = max(schedule.num_microbatches, int(mb.max(initial=0)) + 1)
    key = schedule.stage.astype(np.int64) * m + np.maximum(mb, 0)
    size = schedule.num_stages * m + 1

    def first_row(mask: np.ndarray) -> np.ndarray:
        table = np.full(size, -1, dtype=np.int64)
        table[key[mask][::-1]] = rows[mask][::-1]  # the first row of each key wins
        return table

    fwd = kind == Kind.FORWARD
    back_in = (kind == Kind.BACKWARD) | (kind == Kind.BACKWARD_INPUT)
    ra, rg = kind == Kind.RECV_ACTIVATION, kind == Kind.RECV_GRAD
    recv = np.flatnonzero(ra | rg)
    recv_key = key[recv]
    consumer = np.where(ra[recv], first_row(fwd)[recv_key], first_row(back_in)[recv_key])
    recv, consumer = recv[consumer >= 0], consumer[consumer >= 0]
    free = np.flatnonzero((kind == Kind.BACKWARD) | (kind == Kind.BACKWARD_WEIGHT))
    held = np.flatnonzero(fwd)
    # Events as (row, time, code); the code indexes _D_ACT/_D_RECV. Releases come first, so a tie
    # frees before it takes: free an activation, free a receive buffer, hold one, take a buffer.
    parts = [
        (free, timeline.end[free]),
        (consumer, timeline.end[consumer]),
        (held, timeline.end[held]),
        (recv, timeline.start[recv]),
    ]
    label = np.concatenate([p[0] for p in parts])
    when = np.concatenate([np.asarray(p[1], dtype=float) for p in parts])
    code = np.concatenate([np.full(len(p[0]), c, dtype=np.int8) for c, p in enumerate(parts)])
    rank = schedule.rank[label].astype(np.int64)
    # One stable sort on (rank, time) keeps the release-first order on ties. Each part is already
    # in stream order (rank-major, time rising on a rank), so the sort merges a few sorted runs.
    span = float(when.max()) + 1.0 if len(when) else 1.0
    order = np.argsort(rank * span + when, kind="stable")
    when, code = when[order], code[order]  # the row label is looked up only at each peak
    bounds = np.r_[0, np.cumsum(np.bincount(rank, minlength=schedule.num_ranks))].tolist()
    # Running counts of all ranks at once, each rank's restarted at its first event.
    acts_all, recvs_all = np.cumsum(_D_ACT[code]), np.cumsum(_D_RECV[code])
    carried = np.r_[0, acts_all][bounds[:-1]], np.r_[0, recvs_all][bounds[:-1]]
    out = []
    for r in range(schedule.num_ranks):
        lo, hi = bounds[r], bounds[r + 1]
        acts, recvs = acts_all[lo:hi] - carried[0][r], recvs_all[lo:hi] - carried[1][r]
        total = acts + recvs
        i = int(np.argmax(total)) if hi > lo else 0
        if hi > lo and total[i] > 0:
            peak, peak_t, peak_row = int(total[i]), float(when[lo + i]), int(label[order[lo + i]])
        else:
            peak, peak_t, peak_row = 0, 0.0, -1
        keep = (
            slice(None)
            if hi - lo <= MAX_POINTS
            else np.linspace(0, hi - lo - 1, MAX_POINTS).astype(int)
        )
        out.append(
            RankMemory(
                r,
                tuple([0.0] + when[lo:hi][keep].tolist()),
                tuple([0] + acts[keep].tolist()),
                tuple([0] + recvs[keep].tolist()),
                peak,
                peak_t,
                str(schedule.instruction(peak_row)) if peak_row >= 0 else "nothing",
            )
        )
    return out


__all__ = ["RankMemory", "memory_over_time"]
