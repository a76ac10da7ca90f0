"""Which DeepSpeed internals the explorer relies on, checked against the installed release.

The explorer times and substitutes through two private seams of ``PipelineEngine``: the
class-level dispatch table ``_INSTRUCTION_MAP`` (instruction type -> method; patching the
``_exec_*`` methods changes nothing because the table holds the functions) and the instance
hook ``_train_schedule()`` that ``train_batch`` asks for its schedule (0.19.8; older releases
look ``schedule.TrainSchedule`` up at call time). A release without them gets one line naming
its version and what is missing, instead of a run that silently times nothing.
"""

from __future__ import annotations

from typing import Any

#: Instruction class names DeepSpeed's training schedule uses (``CommitP2P`` and newer ones are optional).
INSTRUCTIONS = (
    "BackwardPass",
    "ForwardPass",
    "LoadMicroBatch",
    "OptimizerStep",
    "RecvActivation",
    "RecvGrad",
    "ReduceGrads",
    "ReduceTiedGrads",
    "SendActivation",
    "SendGrad",
)


class UnsupportedDeepSpeed(RuntimeError):
    """The installed DeepSpeed lacks an internal the explorer needs (the message says which)."""


def missing(engine_class: Any, schedule_module: Any) -> list[str]:
    """What of the seams above ``engine_class`` / ``schedule_module`` lack (empty: all there)."""
    gaps = []
    table = getattr(engine_class, "_INSTRUCTION_MAP", None)
    if not isinstance(table, dict):
        gaps.append("PipelineEngine._INSTRUCTION_MAP (the instruction dispatch table)")
    else:
        names = {getattr(cls, "__name__", "") for cls in table}
        absent = [n for n in INSTRUCTIONS if n not in names]
        if absent:
            gaps.append(f"dispatch entries for {', '.join(absent)}")
    if not callable(getattr(engine_class, "_train_schedule", None)):
        gaps.append("PipelineEngine._train_schedule() (the per-engine schedule hook)")
    if not isinstance(getattr(schedule_module, "PipeSchedule", None), type):
        gaps.append("deepspeed.runtime.pipe.schedule.PipeSchedule")
    return gaps


def check(version: str, engine_class: Any, schedule_module: Any) -> None:
    """Raise :class:`UnsupportedDeepSpeed` with one line when :func:`missing` finds gaps."""
    gaps = missing(engine_class, schedule_module)
    if gaps:
        raise UnsupportedDeepSpeed(
            f"DeepSpeed {version} is not supported: it lacks {'; '.join(gaps)} "
            "(the explorer is checked with DeepSpeed 0.19.8; install that release)"
        )


def require_installed() -> tuple[str, Any, Any]:
    """Import DeepSpeed's pipeline engine and check it; returns (version, PipelineEngine, schedule module)."""
    import deepspeed
    from deepspeed.runtime.pipe import schedule
    from deepspeed.runtime.pipe.engine import PipelineEngine

    check(deepspeed.__version__, PipelineEngine, schedule)
    return deepspeed.__version__, PipelineEngine, schedule


__all__ = ["INSTRUCTIONS", "UnsupportedDeepSpeed", "check", "missing", "require_installed"]
