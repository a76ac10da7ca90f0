"""DualPipeV (DeepSeek-V3's DualPipe folded into a V) as a compute plan.

Each of ``p`` ranks holds two stages of a ``2p``-stage model placed in a V: rank ``r`` runs
stage ``r`` on the way down and stage ``2p - 1 - r`` on the way back, so the first and the
last stage share rank 0 and the turn (stages ``p - 1`` and ``p``) is a local hand-off on rank
``p - 1``. The per-rank order has eight phases: forwards on the first chunk, forwards on both,
zero-bubble (``I`` then a pending ``W``) on the second, the steady state where a forward of one
chunk is paired with a full backward of the other (DualPipe overlaps each such pair on two
streams; here they run one after the other), then the drain, which switches to split
backwards half-way so the weight gradients fill the tail. This follows the order of DeepSeek's
DualPipeV as PyTorch's ``ScheduleDualPipeV`` computes it; the tests check the two agree.
Steps are unit-time (:func:`asap_steps`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Sequence

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.lowering import ComputePlan, asap_steps, lower
from explorer.pipeline.schedules.schedule import Schedule


def v_stage_to_rank(p: int) -> list[int]:
    """Stage -> rank for the V placement: 0..p-1 down, then p-1..0 back up."""
    return [s if s < p else 2 * p - 1 - s for s in range(2 * p)]


def dualpipev_orders(p: int, m: int) -> list[list[tuple[int, int, int]]]:
    """Per-rank order of ``(kind, stage, microbatch)``; needs ``m >= 2p``."""
    orders = []
    for r in range(p):
        down, up = r, 2 * p - 1 - r
        taken: dict[tuple[int, str], int] = defaultdict(int)
        pending: deque[tuple[int, int]] = deque()
        order: list[tuple[int, int, int]] = []

        def forward(stage: int) -> None:
            order.append((int(Kind.FORWARD), stage, taken[(stage, "F")]))
            taken[(stage, "F")] += 1

        def backward(stage: int, split: bool) -> None:
            mb = taken[(stage, "B")]
            taken[(stage, "B")] += 1
            if split:
                order.append((int(Kind.BACKWARD_INPUT), stage, mb))
                pending.append((stage, mb))
            else:
                order.append((int(Kind.BACKWARD), stage, mb))

        def weight() -> None:
            if pending:
                stage, mb = pending.popleft()
                order.append((int(Kind.BACKWARD_WEIGHT), stage, mb))

        for _ in range(2 * (p - r - 1)):  # 1. fill the way down
            forward(down)
        for _ in range(r + 1):  # 2. both chunks
            forward(down)
            forward(up)
        for _ in range(p - r - 1):  # 3. zero-bubble on the way up
            backward(up, split=True)
            weight()
            forward(up)
        for _ in range(m - 2 * p + r + 1):  # 4. steady: F(down)+B(up), F(up)+B(down)
            forward(down)
            backward(up, split=False)
            forward(up)
            backward(down, split=False)
        for _ in range(p - r - 1):  # 5. the way down is done
            backward(up, split=False)
            forward(up)
            backward(down, split=False)
        split = False  # 6. drain; half-way, backwards split so W can fill the tail
        for i in range(r + 1):
            if i == (r + 1) // 2 and r % 2 == 1:
                split = True
            backward(up, split)
            if i == (r + 1) // 2 and r % 2 == 0:
                split = True
            backward(down, split)
        for _ in range(p - r - 1):  # 7.
            weight()
            backward(down, split)
        for _ in range(r + 1):  # 8. remaining weight gradients
            weight()
        orders.append(order)
    return orders


def dualpipev(p: int, m: int, buffers: Sequence[int] | None = None) -> Schedule:
    orders = dualpipev_orders(p, m)
    steps = asap_steps(orders, 2 * p)
    rows = [(st, k, mb, t) for order, ts in zip(orders, steps) for (k, st, mb), t in zip(order, ts)]
    return lower(
        ComputePlan.from_rows(rows),
        name="dualpipev",
        num_stages=2 * p,
        num_microbatches=m,
        stage_to_rank=v_stage_to_rank(p),
        buffers=buffers,
        params={"kind": "dualpipev", "chunks": 2, "p2p": "batched"},
        placement="producer",
    )


__all__ = ["v_stage_to_rank", "dualpipev_orders", "dualpipev"]
