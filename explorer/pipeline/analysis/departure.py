"""Where a rank's order left the plan: the first instruction it ran that the plan has not there.

A hang (or a wrong gradient) often starts where a rank did something other than what the
schedule says: DeepSpeed 0.8.1's class receives the next activation before it sends the
gradient the plan sends first, an edited CSV moves one action, a user's engine skips a step.
Given the plan (``--kind``/``--from`` or the schedule the job wrote) and what each rank recorded
itself (its instruction lines, in the order it ran them), each rank's instructions of an
iteration are walked beside the plan's stream for that rank; the first position where they
differ is the departure. A rank whose record simply ends (it stopped, or is still running)
has not left the plan. Pure: records are dicts with ``rank``, ``iteration`` and ``text``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from explorer.pipeline.schedules.instructions import Instruction, parse_instruction
from explorer.pipeline.schedules.schedule import Schedule


@dataclass(frozen=True)
class Departure:
    """The first instruction a rank ran that the plan does not have at that point."""

    rank: int
    iteration: int
    position: int  # the instruction's place in the rank's stream (0 first)
    step: int  # the plan's step at that place
    planned: Optional[Instruction]  # None: the plan had ended, the rank went on
    ran: Instruction
    at_s: Optional[float] = None  # when the rank began it, on its own clock (the record's start)

    def sentence(self) -> str:
        where = f"rank {self.rank} left the plan at step {self.step}"
        if self.iteration:
            where += f" of iteration {self.iteration}"
        if self.planned is None:
            return f"{where}: it ran {self.ran.deepspeed_repr()} after the plan's last instruction"
        return (
            f"{where}: it ran {self.ran.deepspeed_repr()} (stage {self.ran.stage}) where the plan "
            f"has {self.planned.deepspeed_repr()} (stage {self.planned.stage})"
        )

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "iteration": self.iteration,
            "position": self.position,
            "step": self.step,
            "planned": None if self.planned is None else str(self.planned),
            "ran": str(self.ran),
            "at_s": self.at_s,
            "sentence": self.sentence(),
        }


def _planned(schedule: Schedule, rank: int) -> list[tuple[int, Instruction]]:
    """The rank's stream as (step, instruction), in the order it runs them."""
    return [(step, ins) for step, instrs in enumerate(schedule.stream(rank)) for ins in instrs]


def _same_action(planned: Instruction, ran: Instruction) -> bool:
    """The same step of the order: kind, stage and micro-batch. The buffer slot is where the
    schedule's allocation puts it, not the order: a plan read from PyTorch's CSV (which names
    no buffers) numbered them its own way, and every receive "left the plan" on a buffer id.
    Where a side names no micro-batch (DeepSpeed's own records), the buffer is all there is."""
    if planned.stage != ran.stage or planned.kind != ran.kind:
        return False
    if planned.microbatch >= 0 and ran.microbatch >= 0:
        return planned.microbatch == ran.microbatch
    return planned.buffer == ran.buffer


def departures(schedule: Schedule, records: Iterable[Mapping]) -> list[Departure]:
    """Each rank's first departure from ``schedule`` (ranks that kept to it: none), the first in
    time first (the records' start times; by rank where they tie or are missing)."""
    ran: dict[tuple[int, int], list[Mapping]] = defaultdict(list)
    for r in records:
        if r.get("text") and r.get("rank") is not None:
            ran[int(r["rank"]), int(r.get("iteration") or 0)].append(r)
    found: dict[int, Departure] = {}
    plans: dict[int, list[tuple[int, Instruction]]] = {}
    for (rank, iteration), texts in sorted(ran.items()):
        if rank in found or not 0 <= rank < schedule.num_ranks:
            continue
        if rank not in plans:  # one stream per rank, whatever the iterations
            plans[rank] = _planned(schedule, rank)
        plan = plans[rank]
        for position, record in enumerate(texts):
            text = str(record["text"])
            planned = plan[position] if position < len(plan) else None
            if planned is not None and (
                str(planned[1]) == text or _same_action(planned[1], parse_instruction(text))
            ):
                continue
            step = planned[0] if planned is not None else (plan[-1][0] if plan else 0)
            start = record.get("start")
            found[rank] = Departure(
                rank,
                iteration,
                position,
                step,
                planned[1] if planned is not None else None,
                parse_instruction(text),
                float(start) if isinstance(start, (int, float)) else None,
            )
            break
    return sorted(
        found.values(), key=lambda d: (d.iteration, d.at_s is None, d.at_s or 0.0, d.rank)
    )


__all__ = ["Departure", "departures"]
