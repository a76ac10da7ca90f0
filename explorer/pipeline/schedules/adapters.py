"""Adapters: DeepSpeed ``PipeSchedule`` classes and ``torch.distributed.pipelining`` orders.

Neither library is imported here. ``from_deepspeed`` accepts any class shaped like
DeepSpeed's ``PipeSchedule`` - constructor ``(micro_batches, stages, stage_id)``, ``steps()``
yielding lists of instructions, ``num_pipe_buffers()`` - and recognises instructions by class
name and ``buffer_id``, so a user's own subclass (or the seed's ``FixBufferTrainSchedule``)
goes through unchanged.

DeepSpeed's instructions carry no micro-batch. Every DeepSpeed schedule processes micro-batches
in order on each stage and its P2P channels are FIFO, so the k-th instruction of a kind on a
stage serves micro-batch k; that is what the engine itself relies on and what the analyses
compare buffer contents against.
"""

from __future__ import annotations

import itertools
import operator
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from explorer.cli_options import schedule_size
from explorer.errors import InputError, excerpt, one_line
from explorer.loading import load_ref
from explorer.pipeline.schedules.instructions import (
    BUFFER_KINDS,
    COMPUTE_KINDS,
    KIND_BY_DEEPSPEED_NAME,
    Instruction,
    Kind,
    parse_instruction,
)
from explorer.pipeline.schedules.lowering import ComputePlan, lower
from explorer.pipeline.schedules.schedule import NO_COMPUTE, Schedule, from_streams
from explorer.pipeline.schedules.torch_actions import to_action

#: Largest value a stage, micro-batch or buffer id may take (the columns are 32-bit).
MAX_ID = 2**31 - 1


def step_limit(stages: int, microbatches: int) -> int:
    """Steps one stage's ``steps()`` may yield: DeepSpeed's schedules take ``2 (M + P - 1)``; far more is a runaway."""
    return 8 * (microbatches + stages) + 1024


def instruction_limit(stages: int, microbatches: int) -> int:
    """Instructions all stages together may yield: DeepSpeed's take about 7 per stage and micro-batch."""
    return 32 * stages * microbatches + 64 * stages + 4096


def load_class(spec: str) -> type:
    """Import ``MODULE:CLASS`` (the module must be on ``PYTHONPATH``)."""
    return load_ref(spec, "--from", "my_schedules:FixBufferTrainSchedule", "MODULE:CLASS")


def _user_call(schedule_class: Any, stage: int, what: str, fn: Any, *args: Any) -> Any:
    """Call the user's code; whatever it raises (even ``sys.exit``) is a message, never a crash."""
    try:
        return fn(*args)
    except InputError:
        raise
    except (Exception, SystemExit) as exc:  # a user's class: report, never crash
        name = getattr(schedule_class, "__name__", "the class")
        raise InputError(
            f"{name}(stage_id={stage}) failed in {what}: {type(exc).__name__}: "
            f"{one_line(str(exc), 300)}"
        ) from None


def _buffer_count(schedule_class: Any, stage: int, value: Any) -> int:
    """``num_pipe_buffers()``: a positive integer no larger than the micro-batches it could ever hold."""
    name = getattr(schedule_class, "__name__", "the class")
    try:
        count = operator.index(value)
    except TypeError:
        raise InputError(
            f"{name}(stage_id={stage}).num_pipe_buffers() returned {excerpt(repr(value))}: "
            "it must return a whole number of buffers, at least 1"
        ) from None
    if not 1 <= count <= MAX_ID:
        raise InputError(
            f"{name}(stage_id={stage}).num_pipe_buffers() returned {excerpt(str(count))}: "
            f"it must be between 1 and {MAX_ID:,} (a stage needs a buffer to receive into)"
        )
    return count


def _buffer_id(cmd: Any, kind: Kind, stage: int, step: int, buffers: int) -> int:
    """A buffer instruction's ``buffer_id``: an integer in ``0..buffers-1`` (DeepSpeed indexes a list with it)."""
    buf = getattr(cmd, "buffer_id", None)
    if buf is None:
        return -1
    where = f"stage {stage} step {step}: {type(cmd).__name__}"
    try:
        value = operator.index(buf)
    except TypeError:
        raise InputError(
            f"{where} has buffer_id={excerpt(repr(buf))}: buffer ids are whole numbers "
            f"0..{buffers - 1} (num_pipe_buffers() is {buffers})"
        ) from None
    if kind not in BUFFER_KINDS:  # kept as given; no buffer list is indexed with it
        if not -1 <= value <= MAX_ID:
            raise InputError(
                f"{where} has buffer_id={excerpt(str(value))}: use -1 (none) or 0..{MAX_ID:,}"
            )
        return value
    if not 0 <= value < buffers:
        raise InputError(
            f"{where} has buffer_id={excerpt(str(value))}, outside 0..{buffers - 1}: "
            f"num_pipe_buffers() is {buffers}, and DeepSpeed indexes its buffer lists with the id"
        )
    return value


def _bounded(items: Any, limit: int, what: str) -> list:
    """The first items of an iterable, refusing one longer than ``limit`` (an endless generator)."""
    out = list(itertools.islice(iter(items), limit + 1))
    if len(out) > limit:
        raise InputError(
            f"{what} yielded more than {limit:,}: more than any pipeline schedule of this size needs "
            "(an endless generator?); make it stop"
        )
    return out


def from_deepspeed(
    schedule_class: Any, stages: int, microbatches: int, *, name: Optional[str] = None
) -> Schedule:
    """Run a DeepSpeed-style schedule class for every stage and collect its instructions.

    The class is the user's code: anything it raises, a ``num_pipe_buffers()`` below 1, a
    ``buffer_id`` that is not an integer inside the buffers, or a ``steps()`` that never ends
    (more than :func:`step_limit` steps or :func:`instruction_limit` instructions) is an
    :class:`InputError` naming the stage and step.
    """
    if (
        not isinstance(schedule_class, type)
        or not callable(getattr(schedule_class, "steps", None))
        or not callable(getattr(schedule_class, "num_pipe_buffers", None))
    ):
        raise InputError(
            f"{excerpt(getattr(schedule_class, '__name__', repr(schedule_class)))} is not a pipeline schedule class: "
            "it needs a constructor (micro_batches, stages, stage_id), steps() and num_pipe_buffers()"
        )
    for label, value in (("stages", stages), ("micro-batches", microbatches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{label} must be a positive integer; got {excerpt(repr(value))}")
    max_steps, budget = step_limit(stages, microbatches), instruction_limit(stages, microbatches)
    streams: list[list[list[Instruction]]] = []
    buffers: list[int] = []
    labels: list[list[int]] = []
    for stage in range(stages):
        sched = _user_call(
            schedule_class,
            stage,
            "its constructor",
            lambda s=stage: schedule_class(micro_batches=microbatches, stages=stages, stage_id=s),
        )
        count = _buffer_count(
            schedule_class,
            stage,
            _user_call(schedule_class, stage, "num_pipe_buffers()", sched.num_pipe_buffers),
        )
        buffers.append(count)

        def read_steps(s=stage, sched=sched) -> list[list[Any]]:
            nonlocal budget
            rows = []
            for t, cmds in enumerate(
                _bounded(sched.steps(), max_steps, f"steps() of stage {s} (steps)")
            ):
                row = _bounded(
                    cmds, budget, f"steps() of stage {s} (instructions in all, at step {t})"
                )
                budget -= len(row)
                rows.append(row)
            return rows

        steps = _user_call(schedule_class, stage, "steps()", read_steps)
        counters: dict[Kind, int] = {}
        out_steps: list[list[Instruction]] = []
        for t, cmds in enumerate(steps):
            row: list[Instruction] = []
            for cmd in cmds:
                kind = KIND_BY_DEEPSPEED_NAME.get(type(cmd).__name__)
                if kind is None:
                    raise InputError(
                        f"stage {stage} step {t}: unknown instruction {excerpt(type(cmd).__name__)}; expected one of "
                        f"{', '.join(sorted(KIND_BY_DEEPSPEED_NAME))}"
                    )
                mb = -1
                if kind.has_microbatch:
                    mb = counters.get(kind, 0)
                    counters[kind] = mb + 1
                row.append(
                    Instruction(
                        stage=stage,
                        kind=kind,
                        microbatch=mb,
                        buffer=_buffer_id(cmd, kind, stage, t, count),
                    )
                )
            out_steps.append(row)
        streams.append(out_steps)
        step_fn = getattr(sched, "_step_to_micro_batch", None)
        labels.append(
            [_label(schedule_class, stage, t, step_fn) for t in range(len(steps))]
            if callable(step_fn)
            else list(range(len(steps)))
        )
    width = max((len(s) for s in streams), default=0)
    label_arr = np.array([row + [0] * (width - len(row)) for row in labels], dtype=np.int64)
    return from_streams(
        streams,
        num_microbatches=microbatches,
        stage_to_rank=list(range(stages)),
        buffers=buffers,
        name=name or schedule_class.__name__,
        params={
            "kind": "deepspeed-class",
            "class": f"{schedule_class.__module__}.{schedule_class.__qualname__}",
            "p2p": "blocking",
        },
        step_labels=label_arr,
    )


def _label(schedule_class: Any, stage: int, step: int, step_fn: Any) -> int:
    """DeepSpeed's ``_step_to_micro_batch(step)[0]``, a label only: anything not a small integer counts as -1."""
    value = _user_call(schedule_class, stage, "_step_to_micro_batch()", step_fn, step)
    try:
        label = operator.index(value[0])
    except (TypeError, IndexError, KeyError):
        return -1
    return label if -MAX_ID <= label <= MAX_ID else -1


def _listed(numbers: Sequence[int], shown: int = 4) -> str:
    """A few of ``numbers`` and how many more: a refusal stays one short line however many there are."""
    head = ", ".join(str(n) for n in numbers[:shown])
    rest = len(numbers) - shown
    return head if rest <= 0 else f"{head} and {rest:,} more"


def from_torch_pipelining(
    pipeline_order: Mapping[int, Sequence[Any]],
    *,
    num_microbatches: Optional[int] = None,
    num_stages: Optional[int] = None,
    name: str = "torch-pipelining",
) -> Schedule:
    """Lower a ``torch.distributed.pipelining`` ``pipeline_order`` (rank -> actions per time step).

    Actions may be ``_Action`` tuples or their text (``"2F0"``); ``None`` is an idle step. Each
    compute action takes one step; an overlapped pair (``OVERLAP_F_B``) takes two.
    Only compute actions are read (``F``, ``B``, ``I``, ``W``); exchanges are added by the same
    rules as every generated schedule: each send right after the compute that produced its data
    (as PyTorch's ``_add_send_recv`` does), each receive right before the compute that needs it.
    """
    rows: list[tuple[int, int, int, int]] = []
    stage_to_rank: dict[int, int] = {}
    for rank, actions in sorted(pipeline_order.items()):
        t = 0
        for item in actions:
            action = to_action(item)
            if action is None:
                t += 1
                continue
            # An overlapped forward+backward (DualPipeV) runs its parts one after the other here.
            for part in action.parts:
                kind = part.kind
                if kind not in COMPUTE_KINDS:
                    continue
                stage = part.stage
                if stage_to_rank.setdefault(stage, rank) != rank:
                    raise InputError(
                        f"stage {stage} appears on ranks {stage_to_rank[stage]} and {rank}"
                    )
                mb = -1 if part.microbatch is None else part.microbatch
                rows.append((stage, int(kind), mb, t))
                t += 1
    if not rows:
        raise InputError(NO_COMPUTE)
    p = num_stages or max(stage_to_rank) + 1
    m = num_microbatches or max(r[2] for r in rows) + 1
    if p <= max(stage_to_rank):  # the tables are sized by p: a larger stage falls off them
        raise InputError(
            f"the order names stage {max(stage_to_rank)}, beyond the num_stages={p} given: give a "
            "count that holds it (or leave it out to count from the order)"
        )
    schedule_size(None, p, m)
    missing = [s for s in range(p) if s not in stage_to_rank]
    if missing:
        raise InputError(
            f"{len(missing):,} of the {p:,} stages never compute in this order "
            f"(stage{'s' if len(missing) > 1 else ''} {_listed(missing)}); give num_stages or complete the order"
        )
    return lower(
        ComputePlan.from_rows(rows),
        name=name,
        num_stages=p,
        num_microbatches=m,
        stage_to_rank=[stage_to_rank[s] for s in range(p)],
        params={"kind": name, "p2p": "batched"},
        placement="producer",
    )


__all__ = ["from_deepspeed", "from_torch_pipelining", "load_class", "parse_instruction"]
