"""Every gradient exactly once: each micro-batch's weight gradient reaches each stage's optimizer step once.

A stage accumulates one weight gradient per micro-batch - from its full backward ``B``, or from
the weight part ``W`` when the backward is split - and the optimizer step of its rank applies
the sum. A schedule that drops a backward, runs one twice, or runs it after the optimizer step
trains on the wrong gradient without any error: a wiped accumulation (a gradient that never
arrives) or a doubly counted one. The check counts, per stage and micro-batch, the weight
gradients produced before the rank's optimizer step (in the rank's stream order) and names each
count that is not exactly one.

The invariant holds only for a schedule that trains (:func:`trains`). A forward-only schedule
(DeepSpeed's ``InferenceSchedule``) produces no gradient at all, and calling each of its
micro-batches "never reaches the optimizer step" would call a correct schedule wrong. A schedule
without an ``OptimizerStep`` instruction (PyTorch's schedules: the step follows ``step()``) has
every gradient counted, since nothing in it comes after the step.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explorer.pipeline.analysis.findings import GradientCount
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

#: Instructions only a training schedule has: any one of them makes the schedule a training one.
TRAINING_KINDS = (
    Kind.BACKWARD,
    Kind.BACKWARD_INPUT,
    Kind.BACKWARD_WEIGHT,
    Kind.SEND_GRAD,
    Kind.RECV_GRAD,
    Kind.REDUCE_GRADS,
    Kind.REDUCE_TIED_GRADS,
    Kind.OPTIMIZER_STEP,
)


def trains(schedule: Schedule) -> bool:
    """Whether the schedule trains (has gradients to count) or only runs forwards.

    Any backward, gradient exchange, reduction or optimizer step makes it a training schedule.
    A schedule may also say so itself with ``params["training"]`` (saved with it in the text
    form): a training schedule that lost every backward still says so and is still checked, since
    the parameter, where present, wins over what the instructions suggest.
    """
    declared = schedule.params.get("training")
    if declared is not None:
        return bool(declared)
    # A training schedule shows a gradient kind within its first rows (a backward, or the last
    # stage's gradient send): look there first, the whole column only when it is not there. A
    # table lookup, not ``np.isin`` (4x slower on 391,296 rows, 6x on a sweep's small ones).
    kind = schedule.kind
    head = kind[:_HEAD]
    return bool(_TRAINING[head].any() or (len(kind) > _HEAD and _TRAINING[kind[_HEAD:]].any()))


#: Per kind, whether it is one of :data:`TRAINING_KINDS`.
_TRAINING = np.zeros(len(Kind), dtype=bool)
_TRAINING[[int(k) for k in TRAINING_KINDS]] = True
#: Rows :func:`trains` reads before the rest of the kind column.
_HEAD = 4096


def gradient_counts(schedule: Schedule) -> list[GradientCount]:
    """Every (stage, micro-batch) whose weight gradient does not reach the optimizer step exactly
    once; none for a schedule that does not train (:func:`trains`)."""
    if not trains(schedule):
        return []
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
    if not len(bad):
        return []
    return [
        _pinned(schedule, int(s), int(m), int(counted[s, m]), int(late[s, m]), grads, cell, limit)
        for s, m in bad
    ]


def _pinned(
    schedule: Schedule,
    stage: int,
    microbatch: int,
    count: int,
    late: int,
    grads: np.ndarray,
    cell: np.ndarray,
    limit: np.ndarray,
) -> GradientCount:
    """The finding with the cell a person should look at: the gradient that is one too many (or
    late), else where the missing one is missed (the optimizer step, or the rank's last step)."""
    rank = int(schedule.stage_to_rank[stage])
    mine = grads[cell == stage * schedule.num_microbatches + microbatch]
    if count > 1 or late:
        row = int(mine[1] if count > 1 else mine[-1])
    else:
        own = np.nonzero(schedule.rank == rank)[0]
        row = int(limit[rank]) if limit[rank] < len(schedule) else int(own[-1]) if len(own) else -1
    step = int(schedule.step[row]) if row >= 0 else 0
    return GradientCount(stage, microbatch, count, late, rank, step)


def gradients_report(schedule: Schedule, wrong: Sequence[GradientCount]) -> dict:
    """JSON-ready: whether the invariant applies, ``ok``, and each (stage, micro-batch) that is
    not exactly once (``wrong``: the check's own findings, never counted again here)."""
    applies = trains(schedule)
    return {
        "ok": not wrong,
        "applies": applies,
        "why": None if applies else "a forward-only schedule produces no gradient",
        "checked": schedule.num_stages * schedule.num_microbatches if applies else 0,
        "not_exactly_once": [w.to_dict() for w in wrong],
    }


__all__ = ["GradientCount", "TRAINING_KINDS", "trains", "gradient_counts", "gradients_report"]
