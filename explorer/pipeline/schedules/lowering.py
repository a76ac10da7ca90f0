"""Lower a compute-only plan (who computes what at which step) into a full schedule.

Generators for GPipe, 1F1B, interleaved 1F1B and zero-bubble only decide the *compute*
order and the unit-time step of each ``F``/``B``/``I``/``W``. Everything else follows the same
rules for all of them, so it lives here once:

- each receive sits in the step of the compute that needs it, right before it. Its matching
  send sits either in the same step on the producing rank (``placement="consumer"``,
  DeepSpeed's convention for blocking P2P: the producer keeps the output buffer until the
  consumer asks for it, and every pair shares its step) or right after the compute that
  produced the data (``placement="producer"``, PyTorch's convention for batched P2P: the send
  is posted as soon as the data exists);
- inside a step, a rank's exchanges are ordered by the stage link they use (lowest first),
  gradients before activations on the same link (DeepSpeed's fixed order: a stage sends the
  old gradient before it receives a new activation into the same buffer). Both ends of a
  link then meet the pair at the same position, which makes the consumer-placed schedule
  deadlock-free even with blocking pairwise send/recv (the analysis checks it rather than
  trusting this argument);
- ``LoadMicroBatch`` on the first and last stage before their forward (inputs, labels);
- ``ReduceGrads`` and ``OptimizerStep`` on every rank in the last step;
- buffer ids are ``microbatch % buffers[stage]`` as in DeepSpeed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping, Sequence, get_args

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule, from_columns


@dataclass(frozen=True)
class ComputePlan:
    """Compute operations as columns: ``kind`` is FORWARD/BACKWARD/BACKWARD_INPUT/BACKWARD_WEIGHT."""

    stage: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    step: np.ndarray

    @staticmethod
    def from_rows(rows: Sequence[tuple[int, int, int, int]]) -> "ComputePlan":
        """Rows of ``(stage, kind, microbatch, step)``."""
        arr = np.asarray(rows, dtype=np.int64).reshape(-1, 4)
        return ComputePlan(arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3])


# Order groups inside a step: exchanges, loads, compute, end of batch.
_GROUP_P2P, _GROUP_LOAD, _GROUP_COMPUTE, _GROUP_SEND_AFTER, _GROUP_END = 0, 1, 2, 3, 4
#: Where a send sits: in the consumer's receive step (DeepSpeed) or right after its compute (PyTorch).
Placement = Literal["consumer", "producer"]
PLACEMENTS: tuple[Placement, ...] = get_args(Placement)


def lower(
    plan: ComputePlan,
    *,
    name: str,
    num_stages: int,
    num_microbatches: int,
    stage_to_rank: Sequence[int],
    buffers: Sequence[int] | None = None,
    params: Mapping[str, object] | None = None,
    placement: Placement = "consumer",
) -> Schedule:
    """Add exchanges, loads, buffers and the optimizer step to a compute plan."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {PLACEMENTS}, got {placement!r}")
    s2r = np.asarray(stage_to_rank, dtype=np.int64)
    counts = np.asarray(
        buffers if buffers is not None else [num_microbatches] * num_stages, dtype=np.int64
    )
    last = num_stages - 1
    st, kd, mb, tt = plan.stage, plan.kind, plan.microbatch, plan.step

    cols: list[tuple[np.ndarray, ...]] = []  # (sort key, rank, step, kind, stage, mb)
    # Rows sort by one composite key instead of a five-key lexsort: (rank, step, group, link,
    # receive last); ties on one link happen only when both stages live on one rank: send first.
    span_step = int(tt.max()) + 1 if len(tt) else 1  # sends sit no later than the last compute
    span_key = 2 * num_stages + 2  # links are below 2 * num_stages; the end group uses 0 and 1
    num_ranks = int(s2r.max()) + 1 if len(s2r) else 1
    # int32 keys when every one fits: half the bytes to concatenate and sort.
    key_type = np.int32 if num_ranks * span_step * 5 * span_key * 2 < 2**31 else np.int64

    def add(rank, step, group, key, kind, stage, micro):
        n = len(stage)
        # Exchanges pass one kind; only the compute part passes an array (of compute kinds).
        is_recv = not isinstance(kind, np.ndarray) and kind in (
            Kind.RECV_ACTIVATION,
            Kind.RECV_GRAD,
        )
        rank, step, stage, micro = (_column(x, n) for x in (rank, step, stage, micro))
        kind = _column(kind, n, np.int8)  # the schedule's kind type: a quarter of the bytes
        composite = rank.astype(key_type) * span_step + step
        composite = ((composite * 5 + group) * span_key + key) * 2 + is_recv
        cols.append((composite.astype(key_type, copy=False), rank, step, kind, stage, micro))

    fwd = kd == Kind.FORWARD
    grad = (kd == Kind.BACKWARD) | (kd == Kind.BACKWARD_INPUT)
    m = int(mb.max()) + 1 if len(mb) else 1
    # Step at which each (stage, micro-batch) produced its activation / input gradient.
    made = {}
    for mask, what in ((fwd, "act"), (grad, "grad")):
        table = np.full((num_stages, m), -1, dtype=np.int64)
        table[st[mask], mb[mask]] = tt[mask]
        made[what] = table
    producer = placement == "producer"

    def send_step(what, src_stage, micro, consumer_step):
        if not producer:
            return consumer_step, _GROUP_P2P
        at = made[what][src_stage, micro]
        # Data that is never produced: keep the send where it is needed, so the buffer
        # analysis reports the send reading an empty buffer at that step.
        missing = at < 0
        return np.where(missing, consumer_step, at), np.where(
            missing, _GROUP_P2P, _GROUP_SEND_AFTER
        )

    # Activation exchange for every forward after the first stage: link = lower stage id.
    sel = fwd & (st > 0)
    link = (st[sel] - 1) * 2 + 1
    add(s2r[st[sel]], tt[sel], _GROUP_P2P, link, Kind.RECV_ACTIVATION, st[sel], mb[sel])
    at, group = send_step("act", st[sel] - 1, mb[sel], tt[sel])
    add(s2r[st[sel] - 1], at, group, link, Kind.SEND_ACTIVATION, st[sel] - 1, mb[sel])
    # Gradient exchange for every backward (full or input part) before the last stage.
    sel = grad & (st < last)
    link = st[sel] * 2
    add(s2r[st[sel]], tt[sel], _GROUP_P2P, link, Kind.RECV_GRAD, st[sel], mb[sel])
    at, group = send_step("grad", st[sel] + 1, mb[sel], tt[sel])
    add(s2r[st[sel] + 1], at, group, link, Kind.SEND_GRAD, st[sel] + 1, mb[sel])
    # Loads: inputs on the first stage, labels on the last.
    sel = fwd & ((st == 0) | (st == last))
    add(s2r[st[sel]], tt[sel], _GROUP_LOAD, 0, Kind.LOAD, st[sel], mb[sel])
    add(s2r[st], tt, _GROUP_COMPUTE, 0, kd, st, mb)
    final = int(tt.max()) if len(tt) else 0
    if (grad | (kd == Kind.BACKWARD_WEIGHT)).any():  # forward only: no gradient to step with
        ranks = np.arange(int(s2r.max()) + 1)
        first_stage = np.array([int(np.nonzero(s2r == r)[0][0]) for r in ranks])
        add(ranks, final, _GROUP_END, 0, Kind.REDUCE_GRADS, first_stage, -1)
        add(ranks, final, _GROUP_END, 1, Kind.OPTIMIZER_STEP, first_stage, -1)

    composite, rank, step, kind, stage, micro = (np.concatenate(c) for c in zip(*cols))
    order = np.argsort(composite, kind="stable")
    rank, step, kind, stage, micro = (
        rank[order],
        step[order],
        kind[order],
        stage[order],
        micro[order],
    )
    if len(micro) and int(micro.max()) < int(counts.min()):  # every id fits: no modulo
        buf = np.where(micro >= 0, micro, -1)
    else:
        buf = np.where(micro >= 0, micro % counts[stage], -1)
    return from_columns(
        name=name,
        num_stages=num_stages,
        num_microbatches=num_microbatches,
        stage_to_rank=stage_to_rank,
        buffers=counts.tolist(),
        rank=rank,
        step=step,
        kind=kind,
        stage=stage,
        microbatch=micro,
        buffer=buf,
        num_steps=final + 1,
        params=params,
        presorted=True,
    )


def _column(x: np.ndarray | np.integer | int, n: int, dtype: type = np.int32) -> np.ndarray:
    """``x`` as a column of ``n`` rows (a scalar repeated); cheaper than broadcasting.
    int32 (int8 for kinds) is the schedule's own column type (fewer bytes to concatenate and
    reorder)."""
    if isinstance(x, np.ndarray) and x.ndim == 1:
        return x.astype(dtype, copy=False)
    return np.full(n, int(x), dtype=dtype)


def asap_steps(
    orders: Sequence[Sequence[tuple[int, int, int]]], num_stages: int
) -> list[list[int]]:
    """Unit-time steps for per-rank compute orders of ``(kind, stage, microbatch)``.

    Each operation takes one step and starts as soon as its rank is free and its input
    exists: a forward needs the previous stage's forward of the same micro-batch, a backward
    (or input-gradient) needs the next stage's backward, a weight-gradient needs its own
    input-gradient. Raises ``ValueError`` naming the stuck operations if an order can never
    complete (an order that waits for something it has not produced yet).
    """
    done: dict[tuple[int, int, int], int] = {}
    steps: list[list[int]] = [[] for _ in orders]
    heads = [0] * len(orders)
    remaining = sum(len(o) for o in orders)
    last = num_stages - 1
    t = 0
    while remaining:
        finished: list[tuple[int, int, int]] = []
        for r, order in enumerate(orders):
            if heads[r] >= len(order):
                continue
            kind, stage, mb = order[heads[r]]
            need = _needs(kind, stage, mb, last)
            if need is None or done.get(need, t) < t:
                steps[r].append(t)
                finished.append((_CATEGORY[kind], stage, mb))
                heads[r] += 1
        if not finished:
            waiting = [orders[r][heads[r]] for r in range(len(orders)) if heads[r] < len(orders[r])]
            raise ValueError(f"compute order never completes: waiting at {waiting[:4]}")
        for key in finished:
            done[key] = t
        remaining -= len(finished)
        t += 1
    return steps


# Forward, gradient-producing (full or input backward), weight gradient.
_CATEGORY: dict[int, int] = {
    Kind.FORWARD: 0,
    Kind.BACKWARD: 1,
    Kind.BACKWARD_INPUT: 1,
    Kind.BACKWARD_WEIGHT: 2,
}


def _needs(kind: int, stage: int, mb: int, last: int) -> tuple[int, int, int] | None:
    if kind == Kind.FORWARD:
        return (0, stage - 1, mb) if stage > 0 else None
    if kind == Kind.BACKWARD_WEIGHT:
        return (1, stage, mb)
    return (1, stage + 1, mb) if stage < last else (0, stage, mb)


__all__ = ["ComputePlan", "Placement", "PLACEMENTS", "lower", "asap_steps"]
