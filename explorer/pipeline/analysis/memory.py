"""Memory per rank over (simulated) time: activations held and input buffers in use, with the peak.

A rank holds a micro-batch's activations on a stage from the end of its forward for as long as
the schedule's own instructions need them. In a training schedule that is until the backward
that no longer needs them ends (the full backward, or the weight part ``W`` when the backward is
split, since ``W`` still reads them). A forward-only schedule (DeepSpeed's ``InferenceSchedule``)
has no backward: the output is needed until its send to the next stage ends, and on the last
stage not past its forward. An input buffer is in use from the start of the receive (or, on the
first stage, the load) until the compute that consumes it ends (an activation until the forward,
a gradient until the backward). Counted in micro-batch units per rank (a rank with several stages
adds them up), because the schedule knows no tensor sizes; multiply by one stage's activation
size for bytes.

Per rank the result is a step function (``times``, ``activations``, ``receive_buffers``: the input
buffers, named for the received ones that most of them are) and
its peak: the largest total and when it is first reached, with the instruction that reached it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.gradients import trains
from explorer.pipeline.analysis.timeline import Timeline
from explorer.pipeline.schedules.instructions import Kind, parse_instruction
from explorer.pipeline.schedules.schedule import Schedule


@dataclass(frozen=True)
class RankMemory:
    """One rank's held activations and input buffers over time (micro-batch units)."""

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
        batches = "micro-batch" if self.peak == 1 else "micro-batches"
        return (
            f"rank {self.rank} peaks at {self.peak} {batches} of memory (activations + input "
            f"buffers) at {self.peak_time:g} {unit}, after {self.peak_words()}"
        )

    def peak_words(self) -> str:
        """The instruction at the peak as the grid writes it (``RG0b0``), its stage named only
        when the rank holds several: the compact form with the stage in front (``0RG0b0``) reads
        as a number glued to a name."""
        try:
            ins = parse_instruction(self.peak_instruction)
        except InputError:
            return self.peak_instruction
        text = ins.kind.code + (str(ins.microbatch) if ins.microbatch >= 0 else "")
        text += f"b{ins.buffer}" if ins.buffer >= 0 else ""
        return text if ins.stage == self.rank else f"{text} (stage {ins.stage})"


#: Points per rank kept in the series, evenly spaced (the peak is always exact).
MAX_POINTS = 128


#: Each event's change to (activations held, input buffers in use), by its code.
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
    # A micro-batch the stage loads instead of receiving (the first stage's input) takes an input
    # buffer just as a received one does; the last stage's labels share the received one's.
    loads = np.flatnonzero(kind == Kind.LOAD)
    loads = loads[first_row(ra)[key[loads]] < 0]
    recv = np.sort(np.concatenate([np.flatnonzero(ra | rg), loads]))
    recv_key = key[recv]
    consumer = np.where(rg[recv], first_row(back_in)[recv_key], first_row(fwd)[recv_key])
    recv, consumer = recv[consumer >= 0], consumer[consumer >= 0]
    free = _releases(schedule, fwd, first_row, key)
    held = np.flatnonzero(fwd)
    # Events as (row, time, code); the code indexes _D_ACT/_D_RECV: free an activation, free a
    # buffer, hold an activation, take a buffer. Events at one time on one rank happen in the
    # rank's stream order (an instruction's start before its end, a row before the next), which
    # is what the rank does: stage 1 of DeepSpeed's inference schedule receives micro-batch 1
    # before it sends micro-batch 0, so both are in memory at once even when the send takes no
    # time. At one point of the stream, a release comes before a hold.
    parts = [
        (free, timeline.end[free], 1),
        (consumer, timeline.end[consumer], 1),
        (held, timeline.end[held], 1),
        (recv, timeline.start[recv], 0),
    ]
    label = np.concatenate([p[0] for p in parts])
    when = np.concatenate([np.asarray(p[1], dtype=float) for p in parts])
    code = np.concatenate([np.full(len(p[0]), c, dtype=np.int8) for c, p in enumerate(parts)])
    at_end = np.concatenate([np.full(len(p[0]), p[2], dtype=np.int64) for p in parts])
    rank = schedule.rank[label].astype(np.int64)
    # Two stable sorts: by stream position (and code), then by (rank, time), which keeps the
    # stream order on ties.
    first = np.argsort((label.astype(np.int64) * 2 + at_end) * 4 + code, kind="stable")
    span = float(when.max()) + 1.0 if len(when) else 1.0
    order = first[np.argsort((rank * span + when)[first], kind="stable")]
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


def _releases(schedule: Schedule, fwd: np.ndarray, first_row, key: np.ndarray) -> np.ndarray:
    """The rows whose end frees a held activation: one per forward (see the module docstring).

    Training: every backward that ends a micro-batch's use (``B``, or ``W`` when split). Forward
    only: the send of the forward's output, or the forward itself where nothing is sent.
    """
    kind = schedule.kind
    if trains(schedule):
        return np.flatnonzero((kind == Kind.BACKWARD) | (kind == Kind.BACKWARD_WEIGHT))
    forwards = np.flatnonzero(fwd)
    send = first_row(kind == Kind.SEND_ACTIVATION)[key[forwards]]
    return np.where(send >= 0, send, forwards)


__all__ = ["RankMemory", "memory_over_time"]
