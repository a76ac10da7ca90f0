"""GPipe, 1F1B and interleaved 1F1B as compute plans (lowered by :mod:`..lowering`).

Steps are unit-time: each forward or backward takes one step and starts as soon as its rank
is free and its input has arrived. GPipe and 1F1B have closed forms for those steps (checked
against :func:`asap_steps` by the property tests), which keeps 64 x 1,024 builds vectorised.
Interleaved 1F1B follows Megatron-LM's order (groups of ``stages`` micro-batches per chunk,
warm-up ``2 * (p - r - 1) + (v - 1) * p``) and derives its steps with :func:`asap_steps`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.lowering import ComputePlan, asap_steps, lower
from explorer.pipeline.schedules.schedule import Schedule


def _grid(p: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    s, i = np.meshgrid(np.arange(p), np.arange(m), indexing="ij")
    return s.ravel(), i.ravel()


def _plan(s: np.ndarray, i: np.ndarray, f_step: np.ndarray, b_step: np.ndarray) -> ComputePlan:
    return ComputePlan(
        stage=np.concatenate([s, s]),
        kind=np.concatenate(
            [np.full(len(s), int(Kind.FORWARD)), np.full(len(s), int(Kind.BACKWARD))]
        ),
        microbatch=np.concatenate([i, i]),
        step=np.concatenate([f_step, b_step]),
    )


def gpipe_plan(p: int, m: int) -> ComputePlan:
    """All forwards, then all backwards in micro-batch order (as ``ScheduleGPipe``)."""
    s, i = _grid(p, m)
    return _plan(s, i, s + i, 2 * p - 2 - s + m + i)


def one_f_one_b_plan(p: int, m: int) -> ComputePlan:
    """Warm-up of ``min(p - s, m)`` forwards, then one forward after each backward."""
    s, i = _grid(p, m)
    warm = np.minimum(p - s, m)
    f_step = np.where(i < warm, s + i, 2 * i + s)
    return _plan(s, i, f_step, 2 * p - 1 - s + 2 * i)


def gpipe(p: int, m: int, buffers: Sequence[int] | None = None) -> Schedule:
    return lower(
        gpipe_plan(p, m),
        name="gpipe",
        num_stages=p,
        num_microbatches=m,
        stage_to_rank=range(p),
        buffers=buffers,
        params={"kind": "gpipe", "p2p": "batched"},
        placement="producer",
    )


def one_f_one_b(p: int, m: int, buffers: Sequence[int] | None = None) -> Schedule:
    return lower(
        one_f_one_b_plan(p, m),
        name="1f1b",
        num_stages=p,
        num_microbatches=m,
        stage_to_rank=range(p),
        buffers=buffers,
        params={"kind": "1f1b", "p2p": "batched"},
        placement="producer",
    )


def interleaved_orders(p: int, m: int, v: int) -> list[list[tuple[int, int, int]]]:
    """Megatron-LM's per-rank order of ``(kind, stage, microbatch)`` with ``v`` chunks.

    Rank ``r`` holds stages ``r, r + p, ..., r + (v - 1) * p``. Virtual micro-batch ``k``
    (forward) is micro-batch ``(k // (p * v)) * p + k % p`` on chunk ``(k % (p * v)) // p``;
    backwards walk the chunks in reverse.
    """
    total = m * v
    orders: list[list[tuple[int, int, int]]] = []
    for r in range(p):

        def op(k: int, forward: bool) -> tuple[int, int, int]:
            in_group = k % (p * v)
            chunk = in_group // p
            if not forward:
                chunk = v - 1 - chunk
            mb = (k // (p * v)) * p + k % p
            return (int(Kind.FORWARD if forward else Kind.BACKWARD), chunk * p + r, mb)

        warm = min((p - r - 1) * 2 + (v - 1) * p, total)
        order = [op(k, True) for k in range(warm)]
        for i in range(total - warm):
            order.append(op(warm + i, True))
            order.append(op(i, False))
        order.extend(op(k, False) for k in range(total - warm, total))
        orders.append(order)
    return orders


def interleaved(p: int, m: int, v: int, buffers: Sequence[int] | None = None) -> Schedule:
    orders = interleaved_orders(p, m, v)
    steps = asap_steps(orders, p * v)
    rows = [(st, k, mb, t) for order, ts in zip(orders, steps) for (k, st, mb), t in zip(order, ts)]
    return lower(
        ComputePlan.from_rows(rows),
        name="interleaved-1f1b",
        num_stages=p * v,
        num_microbatches=m,
        stage_to_rank=[s % p for s in range(p * v)],
        buffers=buffers,
        params={"kind": "interleaved-1f1b", "chunks": v, "p2p": "batched"},
        placement="producer",
    )


__all__ = [
    "gpipe_plan",
    "one_f_one_b_plan",
    "gpipe",
    "one_f_one_b",
    "interleaved_orders",
    "interleaved",
]
