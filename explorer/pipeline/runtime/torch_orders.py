"""Which compute order PyTorch's engine runs for a schedule, and whether that order is whole.

PyTorch's ``_PipelineScheduleRuntime`` executes any *compute-only* order (rank -> ``2F0``-style
actions) and adds its own sends and receives, so the cross-check can feed it two kinds of order:

- ``torch``: the order PyTorch's own schedule class computes (``ScheduleGPipe``,
  ``Schedule1F1B``, ``ScheduleInterleaved1F1B``), read without a process group by
  :mod:`explorer.pipeline.runtime.pipelining_orders`;
- ``explorer``: our schedule's own compute rows (F, B, I, W in each rank's order), so the same
  schedule runs on both engines.

``auto`` takes PyTorch's order when the schedule kind has a PyTorch class and that order is
whole, and ours otherwise, saying why. It matters in torch 2.9, where ``Schedule1F1B``'s
``pipeline_order`` on the last rank has no ``F0`` but an ``F`` for micro-batch ``m`` (one past
the end): PyTorch's own validator rejects it, so running it could only fail.

The check here is our own (every stage and micro-batch forwarded and backwarded exactly once,
on the rank that holds the stage, forward first) so the message names what is missing rather
than quoting a private helper whose wording changes between releases. Pure python; torch is
imported only to read PyTorch's orders.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Literal, Optional, get_args

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.torch_actions import TorchAction, format_action, parse_action

#: Schedule kind -> PyTorch schedule class computing the same kind of order.
TORCH_CLASSES = {
    "gpipe": "ScheduleGPipe",
    "1f1b": "Schedule1F1B",
    "interleaved-1f1b": "ScheduleInterleaved1F1B",
}
#: Whose order PyTorch's engine runs: its own class's, the explorer's, or its own when it has one.
OrderSource = Literal["auto", "torch", "explorer"]
ORDERS: tuple[OrderSource, ...] = get_args(OrderSource)
Actions = dict[int, list[str]]


@dataclass(frozen=True)
class OrderChoice:
    """The compute order to run, where it came from, and why (``problem``: the other order's flaw)."""

    actions: Optional[Actions]  # None: nothing runnable (see ``problem``)
    source: str  # "torch" or "explorer"
    torch_schedule: Optional[str]  # the PyTorch class whose order this is, or that was asked for
    problem: Optional[str] = None


def explorer_order(schedule: Schedule) -> Actions:
    """Each rank's compute rows (F, B, I, W) in stream order, as PyTorch action text."""
    out: Actions = {}
    for rank in range(schedule.num_ranks):
        out[rank] = [
            format_action(TorchAction.of(ins.stage, ins.kind, ins.microbatch))
            for step in schedule.stream(rank)
            for ins in step
            if ins.kind in COMPUTE_KINDS
        ]
    return out


def torch_order(schedule: Schedule) -> tuple[str, Actions]:
    """PyTorch's own order for the schedule's kind (idle steps dropped); InputError without a class."""
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    kind = str(schedule.params.get("kind", schedule.name))
    name = TORCH_CLASSES.get(kind)
    if name is None:
        raise InputError(
            f"{kind} has no torch.distributed.pipelining class; PyTorch's engine can run it only "
            f"with order='explorer' (kinds with a class: {', '.join(TORCH_CLASSES)})"
        )
    order = pipeline_order(name, schedule.num_ranks, schedule.num_microbatches, schedule.num_chunks)
    return name, {
        int(r): [str(a) for a in acts if a is not None] for r, acts in sorted(order.items())
    }


def order_problem(
    actions: Actions, num_stages: int, num_microbatches: int, stage_to_rank: tuple[int, ...]
) -> Optional[str]:
    """What keeps ``actions`` from being one whole training step, or None when nothing does."""
    done: Counter = Counter()
    problems: list[str] = []
    for rank, acts in sorted(actions.items()):
        forwarded: set[tuple[int, int]] = set()
        for i, text in enumerate(acts):
            stage, code, mb = _parse(text)
            if not 0 <= stage < num_stages or not 0 <= mb < num_microbatches:
                problems.append(
                    f"rank {rank} position {i}: {text} is outside stages 0..{num_stages - 1} "
                    f"x micro-batches 0..{num_microbatches - 1}"
                )
                continue
            if stage_to_rank[stage] != rank:
                problems.append(
                    f"rank {rank} position {i}: {text} computes stage {stage}, which rank {stage_to_rank[stage]} holds"
                )
            if code == "F":
                forwarded.add((stage, mb))
            elif code in ("B", "I") and (stage, mb) not in forwarded:
                problems.append(f"rank {rank} position {i}: {text} runs before {stage}F{mb}")
            done[stage, code, mb] += 1
    for stage in range(num_stages):
        for mb in range(num_microbatches):
            backward = done[stage, "B", mb] + min(done[stage, "I", mb], done[stage, "W", mb])
            for what, count in (("F", done[stage, "F", mb]), ("B (or I+W)", backward)):
                if count != 1:
                    problems.append(
                        f"stage {stage} micro-batch {mb}: {what} {'missing' if count == 0 else f'{count} times'}"
                    )
    if not problems:
        return None
    more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
    return "; ".join(problems[:3]) + more


def choose_order(schedule: Schedule, order: OrderSource = "auto") -> OrderChoice:
    """The order PyTorch's engine should run for ``schedule`` (see the module docstring)."""
    if order not in ORDERS:
        raise InputError(
            f"order {order!r}: choose auto (PyTorch's own order when whole), torch or explorer"
        )
    shape = (schedule.num_stages, schedule.num_microbatches, schedule.stage_to_rank)
    kind = str(schedule.params.get("kind", schedule.name))
    name = TORCH_CLASSES.get(kind)
    if order == "explorer" or (order == "auto" and name is None):
        actions = explorer_order(schedule)
        problem = order_problem(actions, *shape)
        why = (
            problem
            and f"the explorer's {kind} order is not one whole training step for PyTorch's engine: {problem}"
        )
        return OrderChoice(None if problem else actions, "explorer", None, why)
    try:
        name, actions = torch_order(schedule)
    except InputError as exc:
        if order == "torch":
            return OrderChoice(None, "torch", name, str(exc))
        raise
    problem = order_problem(actions, *shape)
    if problem is None:
        return OrderChoice(actions, "torch", name)
    import torch

    why = f"PyTorch {torch.__version__}'s {name}.pipeline_order is not one whole step: {problem}"
    if order == "torch":
        return OrderChoice(None, "torch", name, why)
    return OrderChoice(
        explorer_order(schedule),
        "explorer",
        name,
        why + "; ran the explorer's order of the same kind instead",
    )


def _parse(text: str) -> tuple[int, str, int]:
    """``(stage, type, micro-batch)`` of one compute action's text; InputError for anything else."""
    action = parse_action(text)
    if action is None or action.microbatch is None or action.sub_actions is not None:
        raise InputError(f"cannot read compute action {text!r}: expected text like '2F0'")
    return action.stage, action.type.value, action.microbatch


__all__ = [
    "TORCH_CLASSES",
    "OrderSource",
    "ORDERS",
    "Actions",
    "OrderChoice",
    "explorer_order",
    "torch_order",
    "order_problem",
    "choose_order",
]
