"""PyTorch ``torch.distributed.pipelining`` ranks read from their stacks: where, and on whom.

:func:`~explorer.pipeline.analysis.stacks.read_stack` finds a pipelining schedule's frame and
what it holds (the action's place, stage and micro-batch, the transfer it waits for); here that
becomes the words beside the rank's state and the rank it waits on, so the verdict can follow
the wait as it does for DeepSpeed's engine and the explorer's.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping, Optional

from explorer.pipeline.analysis.stacks import TORCH_TRANSFERS, StackReading
from explorer.pipeline.schedules.schedule import Schedule


def torch_words(reading: StackReading) -> str:
    """Where a PyTorch pipelining rank stands, in words (the note beside its state)."""
    said = []
    if reading.action_index is not None:
        said.append(f"action #{reading.action_index} of its order")
    if reading.stage is not None:
        said.append(f"stage {reading.stage}")
    if reading.kind is not None and reading.activity != "waiting":
        said.append(reading.kind.name.lower().replace("_", " "))
    if reading.microbatch is not None:
        said.append(f"micro-batch {reading.microbatch}")
    if reading.transfer and reading.activity == "waiting":
        said.append(f"waiting for {TORCH_TRANSFERS[reading.transfer][0]} ({reading.transfer})")
    return "PyTorch pipelining: " + (", ".join(said) or "in its schedule")


def stages_seen(readings: Mapping[int, object]) -> dict[int, int]:
    """Stage -> rank, as the multi-stage schedules' frames show it: each rank stands at one of its
    own stages, so where the job's placement of stages is not known, what the ranks show of it is
    the evidence (the rest is not guessed)."""
    return {
        rd.stage: rank
        for rank, rd in readings.items()
        if isinstance(rd, StackReading) and rd.engine == "torch" and rd.stage is not None
    }


def torch_peer(
    reading: StackReading,
    rank: int,
    schedule: Optional[Schedule],
    seen_at: Mapping[int, int] = MappingProxyType({}),
) -> Optional[int]:
    """The rank a PyTorch pipelining rank waits on: the stage after or before its own, by the
    transfer it waits for. The stage is the frame's (multi-stage schedules) or, for the single-
    stage ones (GPipe, 1F1B: one stage per rank), the rank itself. The other stage's rank is the
    schedule's where the doctor knows it; else, for a single-stage schedule, the stage's number
    (one stage per rank); for a multi-stage one, the rank seen standing at that stage
    (``seen_at``, :func:`stages_seen`). None where it waits on no named transfer, or where the
    other stage's rank is not known."""
    if reading.peer_rank is not None or not reading.transfer or reading.activity != "waiting":
        return reading.peer_rank
    stage = reading.stage
    if stage is None:  # a single-stage schedule: the rank's one stage
        stage = schedule.stages_of_rank(rank)[0] if schedule is not None else rank
    other = stage + TORCH_TRANSFERS[reading.transfer][1]
    if schedule is not None:
        to_rank = schedule.stage_to_rank
        return to_rank[other] if 0 <= other < len(to_rank) else None
    if reading.stage is not None:
        return seen_at.get(other)
    return other if other >= 0 else None


__all__ = ["stages_seen", "torch_peer", "torch_words"]
