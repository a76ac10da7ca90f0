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

import importlib
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from explorer.errors import InputError
from explorer.schedules.instructions import KIND_BY_DEEPSPEED_NAME, Instruction, Kind, parse_instruction
from explorer.schedules.lowering import ComputePlan, lower
from explorer.schedules.schedule import Schedule, from_streams


def load_class(spec: str) -> type:
    """Import ``MODULE:CLASS`` (the module must be on ``PYTHONPATH``)."""
    if ":" not in spec:
        raise InputError(f"--from expects MODULE:CLASS, e.g. my_schedules:FixBufferTrainSchedule; got {spec!r}")
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"cannot import module {module_name!r} for --from ({exc}); is it on PYTHONPATH?") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise InputError(f"module {module_name!r} has no attribute {attr!r}") from exc


def from_deepspeed(schedule_class: Any, stages: int, microbatches: int, *, name: Optional[str] = None) -> Schedule:
    """Run a DeepSpeed-style schedule class for every stage and collect its instructions."""
    if not isinstance(schedule_class, type) or not callable(getattr(schedule_class, "steps", None)) \
            or not callable(getattr(schedule_class, "num_pipe_buffers", None)):
        raise InputError(
            f"{getattr(schedule_class, '__name__', schedule_class)!r} is not a pipeline schedule class: "
            "it needs a constructor (micro_batches, stages, stage_id), steps() and num_pipe_buffers()"
        )
    for label, value in (("stages", stages), ("micro-batches", microbatches)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"{label} must be a positive integer; got {value!r}")
    streams: list[list[list[Instruction]]] = []
    buffers: list[int] = []
    labels: list[list[int]] = []
    for stage in range(stages):
        try:
            sched = schedule_class(micro_batches=microbatches, stages=stages, stage_id=stage)
            steps = [list(cmds) for cmds in sched.steps()]
            buffers.append(int(sched.num_pipe_buffers()))
        except InputError:
            raise
        except Exception as exc:  # a user's class: report, never crash
            raise InputError(f"{schedule_class.__name__}(stage_id={stage}) failed: {type(exc).__name__}: {exc}") from exc
        counters: dict[Kind, int] = {}
        out_steps: list[list[Instruction]] = []
        for t, cmds in enumerate(steps):
            row: list[Instruction] = []
            for cmd in cmds:
                kind = KIND_BY_DEEPSPEED_NAME.get(type(cmd).__name__)
                if kind is None:
                    raise InputError(
                        f"stage {stage} step {t}: unknown instruction {type(cmd).__name__!r}; expected one of "
                        f"{', '.join(sorted(KIND_BY_DEEPSPEED_NAME))}"
                    )
                mb = -1
                if kind.has_microbatch:
                    mb = counters.get(kind, 0)
                    counters[kind] = mb + 1
                buf = getattr(cmd, "buffer_id", -1)
                row.append(Instruction(stage=stage, kind=kind, microbatch=mb, buffer=int(buf) if buf is not None else -1))
            out_steps.append(row)
        streams.append(out_steps)
        step_fn = getattr(sched, "_step_to_micro_batch", None)
        labels.append([int(step_fn(t)[0]) if callable(step_fn) else t for t in range(len(steps))])
    width = max((len(s) for s in streams), default=0)
    label_arr = np.array([row + [0] * (width - len(row)) for row in labels], dtype=np.int64)
    return from_streams(
        streams, num_microbatches=microbatches, stage_to_rank=list(range(stages)), buffers=buffers,
        name=name or schedule_class.__name__,
        params={"kind": "deepspeed-class", "class": f"{schedule_class.__module__}.{schedule_class.__qualname__}", "p2p": "blocking"},
        step_labels=label_arr,
    )


_TORCH_COMPUTE = {"F": Kind.FORWARD, "B": Kind.BACKWARD, "I": Kind.BACKWARD_INPUT, "W": Kind.BACKWARD_WEIGHT}


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
        for action in actions:
            if action is None or action == "":
                t += 1
                continue
            # An overlapped forward+backward (DualPipeV) runs its parts one after the other here.
            for part in getattr(action, "sub_actions", None) or (action,):
                stage, ctype, mb = _torch_action(part)
                if ctype not in _TORCH_COMPUTE:
                    continue
                if stage_to_rank.setdefault(stage, rank) != rank:
                    raise InputError(f"stage {stage} appears on ranks {stage_to_rank[stage]} and {rank}")
                rows.append((stage, int(_TORCH_COMPUTE[ctype]), mb, t))
                t += 1
    if not rows:
        raise InputError("the pipeline order holds no compute action (F, B, I or W)")
    p = num_stages or max(stage_to_rank) + 1
    missing = [s for s in range(p) if s not in stage_to_rank]
    if missing:
        raise InputError(f"stages {missing} never compute in this order; give num_stages or complete the order")
    m = num_microbatches or max(r[2] for r in rows) + 1
    return lower(ComputePlan.from_rows(rows), name=name, num_stages=p, num_microbatches=m,
                 stage_to_rank=[stage_to_rank[s] for s in range(p)], params={"kind": name, "p2p": "batched"},
                 placement="producer")


def _torch_action(action: Any) -> tuple[int, str, int]:
    if isinstance(action, str):
        text = action.strip()
        import re

        m = re.fullmatch(r"(\d+)([A-Z_]+)(\d*)", text)
        if not m:
            raise InputError(f"cannot read pipelining action {action!r}; expected text like '2F0'")
        return int(m[1]), m[2], int(m[3]) if m[3] else -1
    stage = getattr(action, "stage_index", None)
    ctype = getattr(action, "computation_type", None)
    if stage is None or ctype is None:
        raise InputError(f"{action!r} is not a pipelining action (needs stage_index and computation_type)")
    mb = getattr(action, "microbatch_index", None)
    return int(stage), str(ctype), -1 if mb is None else int(mb)


__all__ = ["from_deepspeed", "from_torch_pipelining", "load_class", "parse_instruction"]
