"""Schedules on DeepSpeed's engine: an explorer schedule replayed, a foreign class mapped.

DeepSpeed dispatches by the exact instruction type (``_INSTRUCTION_MAP[type(cmd)]``), so an
instruction built from another release's ``schedule.py`` (DeepSpeed 0.8.1 defines its own
classes) is one today's engine does not understand. :class:`MappedSchedule` runs such a class
for one stage and hands the engine today's class of the same name with the same keywords
(``buffer_id``). :func:`replay_class` turns an explorer :class:`~explorer.pipeline.schedules.schedule.
Schedule` (any ``--kind``/``--buffers``/``--order``, or one read from a class) into a
``PipeSchedule`` that yields exactly its steps, so the engine runs what the explorer analysed.
"""

from __future__ import annotations

from typing import Any, Iterator

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

#: Explorer kinds DeepSpeed's engine has no instruction for (zero-bubble's split backward).
NO_COUNTERPART = (Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT)


def unrunnable(schedule: Schedule) -> str | None:
    """Why DeepSpeed's engine cannot run ``schedule`` (one stage per rank, DeepSpeed's kinds), or None."""
    if list(schedule.stage_to_rank) != list(range(schedule.num_stages)):
        return (
            f"DeepSpeed's PipelineEngine runs one stage per rank; this schedule puts stages on ranks "
            f"{list(schedule.stage_to_rank)}: use --chunks 1"
        )
    kinds = {
        ins.kind for r in range(schedule.num_ranks) for row in schedule.stream(r) for ins in row
    }
    odd = sorted(k.deepspeed_name for k in kinds if k in NO_COUNTERPART)
    if odd:
        return (
            f"DeepSpeed's PipelineEngine has no instruction for {', '.join(odd)}: "
            "choose a schedule with whole backward passes (e.g. --kind deepspeed-train or 1f1b)"
        )
    return None


def today(cmd: Any, module: Any) -> Any:
    """``cmd`` as an instance of ``module``'s class of the same name (itself when it already is one)."""
    name = type(cmd).__name__
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise RuntimeError(f"instruction {name} has no class of that name in today's DeepSpeed")
    if type(cmd) is cls:
        return cmd
    return cls(**dict(getattr(cmd, "kwargs", {}) or {}))


def replay_class(module: Any) -> type:
    """A ``PipeSchedule`` subclass of ``module`` that yields given rows of (name, buffer_id)."""

    class ReplaySchedule(module.PipeSchedule):
        """The explorer's schedule for one stage, instruction by instruction."""

        def __init__(
            self, micro_batches: int, stages: int, stage_id: int, rows: list, buffers: int
        ) -> None:
            super().__init__(micro_batches=micro_batches, stages=stages, stage_id=stage_id)
            self.rows, self.buffers = rows, buffers

        def steps(self) -> Iterator[list]:
            for row in self.rows:
                yield [
                    getattr(module, name)(buffer_id=b) if b >= 0 else getattr(module, name)()
                    for name, b in row
                ]

        def num_pipe_buffers(self) -> int:
            return self.buffers

    return ReplaySchedule


def replay(module: Any, schedule: Schedule, stage: int, micro_batches: int) -> Any:
    """``schedule``'s steps for ``stage`` as a ``PipeSchedule`` of DeepSpeed ``module``."""
    rows = [
        [(ins.kind.deepspeed_name, ins.buffer) for ins in step]
        for step in schedule.stream(schedule.stage_to_rank[stage])
    ]
    return replay_class(module)(
        micro_batches, schedule.num_stages, stage, rows, schedule.buffers[stage]
    )


class MappedSchedule:
    """A schedule class from any DeepSpeed release, its instructions mapped onto ``module``'s."""

    def __init__(self, inner: Any, module: Any) -> None:
        self.inner, self.module = inner, module

    def num_pipe_buffers(self) -> int:
        return self.inner.num_pipe_buffers()

    def steps(self) -> Iterator[list]:
        for cmds in self.inner.steps():
            yield [today(c, self.module) for c in cmds]

    def __iter__(self) -> Iterator[list]:
        return self.steps()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


__all__ = ["MappedSchedule", "NO_COUNTERPART", "replay", "replay_class", "today", "unrunnable"]
