"""Per-rank action orders of ``torch.distributed.pipelining`` schedules, without a process group.

PyTorch computes a schedule's ``pipeline_order`` (rank -> action per time step) in the
schedule's constructor from a few facts about its stages. :class:`StageShape` carries exactly
those facts, so the real schedule classes run their own order computation here, on any machine,
and :func:`explorer.pipeline.schedules.adapters.from_torch_pipelining` can analyse the result. PyTorch's
own tests use the same kind of stand-in stage.
"""

from __future__ import annotations

from typing import Any

from explorer.errors import InputError, require

SCHEDULES = (
    "ScheduleGPipe",
    "Schedule1F1B",
    "ScheduleInterleaved1F1B",
    "ScheduleLoopedBFS",
    "ScheduleInterleavedZeroBubble",
    "ScheduleZBVZeroBubble",
    "ScheduleDualPipeV",
)
#: Schedules that place two stages per rank in a V (rank r holds r and 2p - 1 - r).
V_SCHEDULES = ("ScheduleZBVZeroBubble", "ScheduleDualPipeV")


class StageShape:
    """The stage facts a schedule constructor reads: index, counts, position, group rank."""

    def __init__(self, stage_index: int, num_stages: int, group_size: int, group_rank: int) -> None:
        self.stage_index = stage_index
        self.num_stages = num_stages
        self.group_size = group_size
        self.group_rank = group_rank
        self.is_first = stage_index == 0
        self.is_last = stage_index == num_stages - 1
        self.submod = None
        self.has_backward = True
        self.dw_builder = None
        self.stage_index_to_group_rank: dict[int, int] = {}


def pipeline_order(
    schedule_name: str, ranks: int, microbatches: int, chunks: int = 1
) -> dict[int, list[Any]]:
    """``pipeline_order`` of PyTorch's ``schedule_name`` for ``ranks`` x ``chunks`` stages."""
    schedules = require(
        "torch.distributed.pipelining.schedules", "torch", "Reading PyTorch's pipeline orders"
    )
    if schedule_name not in SCHEDULES:
        raise InputError(
            f"unknown PyTorch schedule {schedule_name!r}: choose one of {', '.join(SCHEDULES)}"
        )
    cls = getattr(schedules, schedule_name)
    stages = ranks * chunks
    try:
        if issubclass(cls, schedules.PipelineScheduleSingle):
            if chunks != 1:
                raise InputError(f"{schedule_name} runs one stage per rank; use chunks=1")
            return dict(cls(StageShape(0, stages, ranks, 0), microbatches).pipeline_order)
        if schedule_name in V_SCHEDULES:
            local = [StageShape(0, stages, ranks, 0), StageShape(stages - 1, stages, ranks, 0)]
        else:
            local = [StageShape(c * ranks, stages, ranks, 0) for c in range(chunks)]
        return dict(cls(local, microbatches).pipeline_order)
    except InputError:
        raise
    except (ValueError, AssertionError) as exc:
        raise InputError(
            f"PyTorch's {schedule_name} rejects {ranks} ranks x {chunks} chunks, {microbatches} micro-batches: {exc}"
        ) from exc


__all__ = ["SCHEDULES", "V_SCHEDULES", "StageShape", "pipeline_order"]
