"""PyTorch's schedule CSV (``_dump_csv``/``_load_csv``, torchtitan's ``pipeline_parallel_schedule_csv``), in and out.

One row per rank, one cell per action in PyTorch's text (``0F0``, ``1SEND_F0``, ``0UNSHARD``),
an empty cell for an idle step. PyTorch knows two contents: ``compute_only`` (F, B, I, W; its
runtime adds the sends and receives) and ``compute_comms`` (the order with every send and
receive where the user put it). A file with any exchange in it is read as ``compute_comms`` and
its exchanges keep their places, one action per step, so the deadlock search judges exactly
that order; a compute-only file is lowered the way PyTorch lowers it (each send right after the
compute that produced its data, each receive right before the compute that needs it).
``UNSHARD``/``RESHARD`` (FSDP) have no counterpart in the schedules and are set aside, counted.
"""

from __future__ import annotations

import csv
import io
from typing import Optional

from explorer.cli_options import schedule_size
from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.adapters import from_torch_pipelining
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Instruction, Kind
from explorer.pipeline.schedules.schedule import Schedule, from_streams
from explorer.pipeline.schedules.torch_actions import (
    TorchAction,
    check_numbers,
    format_action,
    parse_action,
)
from explorer.pipeline.schedules.torch_p2p import (
    batches,
    defer_receives,
    parity_order,
    peer_function,
)

#: Action kinds only a training order has.
_TRAINING = (
    Kind.BACKWARD,
    Kind.BACKWARD_INPUT,
    Kind.BACKWARD_WEIGHT,
    Kind.SEND_GRAD,
    Kind.RECV_GRAD,
)

Order = dict[int, list[Optional[TorchAction]]]
#: Largest CSV read (a 64-stage, 1024-micro-batch order is about 2 MB).
MAX_CELLS = 10_000_000


def read_torch_csv(text: str) -> Order:
    """Rank -> actions (None: idle) of a PyTorch schedule CSV; InputError naming the row and column."""
    out: Order = {}
    cells = 0
    for rank, row in enumerate(csv.reader(io.StringIO(text))):
        actions: list[Optional[TorchAction]] = []
        for col, cell in enumerate(row):
            cells += 1
            if cells > MAX_CELLS:
                raise InputError(
                    f"the CSV holds more than {MAX_CELLS:,} cells: no schedule needs that many"
                )
            try:
                actions.append(parse_action(cell))
            except InputError as exc:
                raise InputError(f"row {rank + 1} (rank {rank}), column {col + 1}: {exc}") from None
        out[rank] = actions
    if not any(a is not None for acts in out.values() for a in acts):
        raise InputError("the CSV holds no action: one row per rank, cells like 0F0 or 1SEND_F0")
    return out


def write_torch_csv(order: Order) -> str:
    """The CSV PyTorch's ``_load_csv`` reads: one row per rank in rank order, empty cells for idle steps."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for rank in sorted(order):
        writer.writerow(["" if a is None else format_action(a) for a in order[rank]])
    return buf.getvalue()


def has_comms(order: Order) -> bool:
    return any(
        a is not None and a.kind is not None and a.kind.is_p2p
        for acts in order.values()
        for a in acts
    )


def schedule_from_order(order: Order, name: str = "torch-csv", batching: str = "none") -> Schedule:
    """A schedule from a CSV's order: lowered when compute-only, exchanges kept in place otherwise.

    ``batching`` (compute+comms orders) says which adjacent exchanges one ``batch_isend_irecv``
    posts together (:func:`explorer.pipeline.schedules.torch_p2p.batches`): each on its own (``none``,
    PyTorch's runtime), every adjacent run (``adjacent``), or one batch per peer (``per-peer``).
    """
    if not has_comms(order):
        return from_torch_pipelining(
            {
                r: [None if a is None else format_action(a) for a in acts]
                for r, acts in order.items()
            },
            name=name,
        )
    flat = {r: [p for a in acts if a is not None for p in a.parts] for r, acts in order.items()}
    _check_size(flat)
    stage_to_rank: dict[int, int] = {}
    for rank, acts in sorted(flat.items()):
        for a in acts:
            if a.type.is_compute:
                stage_to_rank.setdefault(a.stage, rank)
    last = max(a.stage for acts in flat.values() for a in acts if a.kind)
    for rank, acts in flat.items():
        for a in acts:
            if a.kind is not None and a.microbatch is None:
                raise InputError(
                    f"rank {rank}: {format_action(a)} has no micro-batch; exchanges and "
                    "computes need one (e.g. 1SEND_F0)"
                )
            if a.kind is not None and a.kind.is_p2p and not _peer_known(a, stage_to_rank):
                raise InputError(
                    f"rank {rank}: {format_action(a)} exchanges with a stage no rank computes; "
                    "complete the order"
                )
    steps_of = batches(
        {r: [a for a in acts if a.kind is not None] for r, acts in flat.items()},
        peer_function(stage_to_rank),
        batching,
    )
    # A forward-only order (PyTorch's schedules in eval, DeepSpeed's inference written out) has
    # no gradient to reduce or step with: it gets no ReduceGrads or OptimizerStep.
    trains = any(a.kind in _TRAINING for acts in flat.values() for a in acts)
    streams: list[list[list[Instruction]]] = []
    for rank in range(max(flat) + 1):
        steps: list[list[Instruction]] = []
        for group in steps_of.get(rank, []):
            step: list[Instruction] = []
            for a in group:
                kind, mb = a.kind, a.microbatch
                assert kind is not None and mb is not None  # both, as checked above
                if kind is Kind.FORWARD and a.stage in (0, last):
                    step.append(Instruction(a.stage, Kind.LOAD, mb, buffer=mb))
                step.append(Instruction(a.stage, kind, mb, buffer=mb))
            steps.append(step)
        own = [a.stage for a in flat.get(rank, []) if a.kind]
        if (
            own and trains
        ):  # PyTorch steps every stage's optimizer after its last backward, as lowering does
            first = min(own)
            steps.append(
                [
                    Instruction(first, Kind.REDUCE_GRADS, -1),
                    Instruction(first, Kind.OPTIMIZER_STEP, -1),
                ]
            )
        streams.append(steps)
    return from_streams(
        streams,
        name=name,
        params={
            "kind": name,
            "p2p": "batched",
            "format": "compute_comms",
            "batching": batching,
            "grad_receive": "per-microbatch",
        },
    )


def _check_size(flat: dict[int, list[TorchAction]]) -> None:
    """Hold a compute+comms order to the limits ``--stages`` and ``--microbatches`` have, before
    its streams and stage tables are sized by its largest numbers."""
    stages = microbatches = 0
    for acts in flat.values():
        for a in acts:
            if a.kind is None:  # UNSHARD/RESHARD are set aside, their numbers unused
                continue
            check_numbers(a)
            stages = max(stages, a.stage + 1)
            microbatches = max(microbatches, (a.microbatch or 0) + 1)
    schedule_size(None, stages, microbatches)


#: The file of a PyTorch engine run folder holding the runtime's compute+comms order (rank -> texts).
ORDER_FILE = "torch_order.json"


def runtime_schedule(order: dict[int, list[str]]) -> Schedule:
    """The schedule PyTorch's ``_PipelineScheduleRuntime`` executes, from its compute+comms order
    (``pipeline_order_with_comms`` as text): each action its own step, as the runtime posts
    every exchange on its own. The PyTorch engine's message lines and their reader both place
    exchanges by it, so they agree on every step."""
    parsed = {int(r): [parse_action(a) for a in acts] for r, acts in order.items()}
    return schedule_from_order(parsed, name="torch-runtime", batching="none")


def _peer_known(a: TorchAction, stage_to_rank: dict[int, int]) -> bool:
    step = -1 if a.type.value in ("RECV_F", "SEND_B") else 1
    return a.stage + step in stage_to_rank


def order_from_schedule(schedule: Schedule, comms: bool = False) -> Order:
    """Each rank's actions in stream order: compute only (PyTorch's default CSV) or with exchanges."""
    out: Order = {}
    for rank in range(schedule.num_ranks):
        acts: list[Optional[TorchAction]] = []
        for step in schedule.stream(rank):
            for ins in step:
                if ins.kind in COMPUTE_KINDS or (comms and ins.kind.is_p2p):
                    acts.append(TorchAction.of(ins.stage, ins.kind, ins.microbatch))
        out[rank] = acts
    return out


def read_schedule_csv(path: str) -> Schedule:
    """``--from FILE.csv``: the file's schedule, named after the file: PyTorch's schedule CSV, or
    the explorer's own (``schedule --format csv``), told apart by the explorer's header."""
    from pathlib import Path

    from explorer import inputs
    from explorer.pipeline.schedules.io import from_csv, is_explorer_csv

    # a spreadsheet's "CSV UTF-8" export starts with a byte-order mark: not part of the first cell
    text = inputs.read_text(path, "schedule CSV").removeprefix("\ufeff")
    try:  # every refusal names the file: the order's own ones too, not only the parser's
        if is_explorer_csv(text):  # explorer schedule --format csv, read back as written
            return from_csv(text)
        return schedule_from_order(read_torch_csv(text), name=Path(path).name)
    except InputError as exc:
        raise InputError(f"{excerpt(path)}: {exc}") from None


def with_p2p_conventions(
    schedule: Schedule, receives: str = "as-given", parity: bool = False, batching: str = "none"
) -> Schedule:
    """``schedule`` with its exchanges moved and grouped as the conventions say (unchanged by
    the defaults).

    Only where exchanges sit changes: every instruction keeps its buffer, every stage its buffer
    count and the schedule its P2P model, so a buffer the schedule reuses too early, or a
    blocking send, is still judged as the schedule has it. A schedule whose instructions the
    rewrite cannot all carry (PyTorch's order holds computes and exchanges; loads, reductions
    and the optimizer step are put back where PyTorch's lowering puts them) is refused rather
    than checked without them.
    """
    if receives == "as-given" and not parity and batching == "none":
        return schedule
    order = order_from_schedule(schedule, comms=True)
    if receives == "deferred":
        order = defer_receives(order)
    if parity:
        order = parity_order(order)
    name = "+".join(
        [schedule.name]
        + (["deferred receives"] if receives == "deferred" else [])
        + (["even/odd"] if parity else [])
        + ([f"{batching} batches"] if batching != "none" else [])
    )
    moved = _as_the_schedule_had_it(
        schedule_from_order(order, name=name, batching=batching), schedule
    )
    if _instructions(moved) != _instructions(schedule):
        raise InputError(
            f"--receives, --parity and --batching rewrite {schedule.name} as PyTorch's pipelining "
            "order, which cannot carry all of its instructions (loads, reductions or optimizer "
            "steps where PyTorch's lowering puts none): check it without them"
        )
    return moved


def _instructions(schedule: Schedule) -> list[tuple[int, ...]]:
    """Every instruction as (stage, kind, micro-batch, buffer), in one order: what a schedule runs,
    wherever it runs it."""
    columns = (schedule.stage, schedule.kind, schedule.microbatch, schedule.buffer)
    return sorted(zip(*(c.tolist() for c in columns)))


def _as_the_schedule_had_it(moved: Schedule, schedule: Schedule) -> Schedule:
    """``moved`` with what the order could not carry from ``schedule``: each instruction's buffer
    and each stage's buffer count, its params (P2P model, gradient receives), and the
    tied-gradient reduction."""
    own: dict[tuple[int, int, int], int] = {}
    columns = (schedule.stage, schedule.kind, schedule.microbatch, schedule.buffer)
    for stage, kind, mb, buf in zip(*(c.tolist() for c in columns)):
        own.setdefault((stage, kind, mb), buf)
    tied = {int(s) for s in schedule.stage[schedule.kind == int(Kind.REDUCE_TIED_GRADS)].tolist()}
    streams = []
    for rank in range(moved.num_ranks):
        steps = []
        for step in moved.stream(rank):
            kept = []
            for ins in step:
                if ins.kind is Kind.REDUCE_GRADS and ins.stage in tied:
                    kept.append(Instruction(ins.stage, Kind.REDUCE_TIED_GRADS, -1))
                key = (ins.stage, int(ins.kind), ins.microbatch)
                kept.append(Instruction(ins.stage, ins.kind, ins.microbatch, own.get(key, -1)))
            steps.append(kept)
        streams.append(steps)
    return from_streams(
        streams,
        num_microbatches=moved.num_microbatches,
        stage_to_rank=moved.stage_to_rank,
        buffers=schedule.buffers,
        name=moved.name,
        # the schedule's own params (its P2P model, how many gradients a stage receives at
        # once, whether it trains), not those of a PyTorch runtime order
        params={**schedule.params, "conventions": moved.name.removeprefix(schedule.name + "+")},
    )


__all__ = [
    "ORDER_FILE",
    "has_comms",
    "order_from_schedule",
    "read_schedule_csv",
    "read_torch_csv",
    "runtime_schedule",
    "schedule_from_order",
    "with_p2p_conventions",
    "write_torch_csv",
]
