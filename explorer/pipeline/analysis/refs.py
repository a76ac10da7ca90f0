"""Turn schedule rows into :class:`Ref` records (only for rows that end up in a finding)."""

from __future__ import annotations

from explorer.pipeline.analysis.findings import Ref
from explorer.pipeline.schedules.schedule import Schedule


def ref(schedule: Schedule, index: int) -> Ref:
    ins = schedule.instruction(int(index))
    return Ref(
        index=int(index),
        rank=int(schedule.rank[index]),
        stage=ins.stage,
        step=int(schedule.step[index]),
        text=str(ins),
        deepspeed_repr=ins.deepspeed_repr(),
    )


__all__ = ["ref"]
