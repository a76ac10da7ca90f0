"""Every gradient exactly once: each micro-batch's weight gradient reaches each stage's optimizer step once.

A stage accumulates one weight gradient per micro-batch - from its full backward ``B``, or from
the weight part ``W`` when the backward is split - and the optimizer step of its rank applies
the sum. A schedule that drops a backward, runs one twice, or runs it after the optimizer step
trains on the wrong gradient without any error: a wiped accumulation (a gradient that never
arrives) or a doubly counted one. The check counts, per stage and micro-batch, the weight
gradients produced before the rank's optimizer step (in the rank's stream order) and names each
count that is not exactly one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.schedules.instructions import Kind
from explorer.schedules.schedule import Schedule


@dataclass(frozen=True)
class GradientCount:
    """A stage and micro-batch whose weight gradient reaches the optimizer step ``count`` times (not 1)."""

    stage: int
    microbatch: int
    count: int
    late: int  # produced after the optimizer step: lost for this iteration

    def describe(self) -> str:
        times = "never" if self.count == 0 else f"{self.count} times"
        late = f" ({self.late} produced after the optimizer step)" if self.late else ""
        return (
            f"stage {self.stage} micro-batch {self.microbatch}: its weight gradient reaches the "
            f"optimizer step {times}, not once{late}"
        )

    def to_dict(self) -> dict:
        return {**vars(self), "description": self.describe()}


def gradient_counts(schedule: Schedule) -> list[GradientCount]:
    """Every (stage, micro-batch) whose weight gradient does not reach the optimizer step exactly once."""
    kind = schedule.kind
    # Rows are in stream order within each rank, so a row index is a position in the stream.
    opt_rows = np.nonzero(kind == Kind.OPTIMIZER_STEP)[0]
    limit = np.full(schedule.num_ranks, np.iinfo(np.int64).max, dtype=np.int64)
    limit[schedule.rank[opt_rows[::-1]].astype(np.int64)] = opt_rows[::-1]  # each rank's first
    grads = np.nonzero((kind == Kind.BACKWARD) | (kind == Kind.BACKWARD_WEIGHT))[0]
    s_, m_ = schedule.stage[grads].astype(np.int64), schedule.microbatch[grads].astype(np.int64)
    inside = (s_ >= 0) & (s_ < schedule.num_stages) & (m_ >= 0) & (m_ < schedule.num_microbatches)
    grads, s_, m_ = grads[inside], s_[inside], m_[inside]
    is_late = grads > limit[schedule.rank[grads].astype(np.int64)]
    size = schedule.num_stages * schedule.num_microbatches
    cell = s_ * schedule.num_microbatches + m_
    shape = (schedule.num_stages, schedule.num_microbatches)
    counted = np.bincount(cell[~is_late], minlength=size).reshape(shape)
    late = np.bincount(cell[is_late], minlength=size).reshape(shape)
    bad = np.argwhere(counted != 1)
    return [GradientCount(int(s), int(m), int(counted[s, m]), int(late[s, m])) for s, m in bad]


def gradients_report(schedule: Schedule) -> dict:
    """JSON-ready: ``ok`` and each (stage, micro-batch) that is not exactly once."""
    wrong = gradient_counts(schedule)
    return {
        "ok": not wrong,
        "checked": schedule.num_stages * schedule.num_microbatches,
        "not_exactly_once": [w.to_dict() for w in wrong],
    }


__all__ = ["GradientCount", "gradient_counts", "gradients_report"]
