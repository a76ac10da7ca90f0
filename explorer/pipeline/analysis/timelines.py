"""Many timelines in one pass of the step loop: what keeps a sweep's bubbles cheap.

The simulator's fast path (:func:`explorer.pipeline.analysis.timeline.per_step_columns`) walks the
steps one after another, all ranks at once. For one small schedule the walk costs a few numpy
calls per step whatever the number of ranks, so a sweep over thousands of sizes spent a third
of its time in that loop. Schedules of different sizes share nothing, so they can be laid
side by side on disjoint ranks (rank and row numbers offset) and walked together: the loop
then runs once per step of the longest schedule in a group instead of once per step of each.
Every schedule's starts and ends are those :func:`~explorer.pipeline.analysis.timeline.simulate` gives
on its own (same operations in the same order; the padding of shorter ranks costs nothing);
the property tests compare the two.

Schedules that the fast path does not take (unmatched exchanges, waits that point to later
steps) are simulated on their own, as :func:`simulate` would.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explorer.pipeline.analysis.exchanges import exchanges
from explorer.pipeline.analysis.findings import Bubble
from explorer.pipeline.analysis.p2p import Matching
from explorer.pipeline.analysis.p2p_models import P2PModel, dependency_steps_ok, execution_order
from explorer.pipeline.analysis.timeline import Costs, bubble, per_step_columns, simulate
from explorer.pipeline.schedules.schedule import Schedule

__all__ = ["bubbles_together", "DENSE_CELLS"]

#: Dense (step x rank x slot) cells one pass may hold: ~16 MB per array, a handful of arrays.
DENSE_CELLS = 2_000_000


def bubbles_together(
    items: Sequence[tuple[Schedule, Matching]], model: P2PModel, costs: Costs = Costs()
) -> list[Bubble]:
    """The bubble of each deadlock-free schedule (in ``model``), as ``simulate(...).bubble``."""
    out: list[Bubble | None] = [None] * len(items)
    group: list[int] = []
    shape = (0, 0, 0)  # steps, ranks, slots of the group so far
    for i, (schedule, matching) in enumerate(items):
        if not _fast(schedule, matching.partner, model):
            out[i] = simulate(schedule, matching, costs, model).bubble
            continue
        slots = _slots(schedule)
        grown = (
            max(shape[0], schedule.num_steps),
            shape[1] + schedule.num_ranks,
            max(shape[2], slots),
        )
        if group and grown[0] * grown[1] * grown[2] > DENSE_CELLS:
            _walk(items, group, model, costs, out)
            group, grown = [], (schedule.num_steps, schedule.num_ranks, slots)
        group.append(i)
        shape = grown
    if group:
        _walk(items, group, model, costs, out)
    bubbles = [b for b in out if b is not None]
    assert len(bubbles) == len(out)  # each item was simulated, alone or in its group
    return bubbles


def _fast(schedule: Schedule, partner: np.ndarray, model: P2PModel) -> bool:
    """The condition under which :func:`simulate` takes its fast path."""
    if not len(schedule):
        return False
    # The schedule's exchange classes are already derived (matching used them): no np.isin.
    unmatched = (partner < 0) & (exchanges(schedule).cls > 0)
    return not unmatched.any() and dependency_steps_ok(schedule, partner, model)


def _slots(schedule: Schedule) -> int:
    """Most rows any rank has in one step (the dense block's last dimension)."""
    return int(
        np.bincount(schedule.rank.astype(np.int64) * schedule.num_steps + schedule.step).max()
    )


def _walk(
    items: Sequence[tuple[Schedule, Matching]],
    group: Sequence[int],
    model: P2PModel,
    costs: Costs,
    out: list,
) -> None:
    ranks, steps, kinds, orders, partners, row_costs, bounds = [], [], [], [], [], [], [0]
    rank_offset = 0
    for i in group:
        schedule, matching = items[i]
        row_offset = bounds[-1]
        ranks.append(schedule.rank.astype(np.int64) + rank_offset)
        steps.append(schedule.step)
        kinds.append(schedule.kind)
        orders.append(execution_order(schedule, model) + row_offset)
        p = matching.partner
        partners.append(np.where(p >= 0, p + row_offset, -1))
        row_costs.append(costs.row_costs(schedule))
        rank_offset += schedule.num_ranks
        bounds.append(row_offset + len(schedule))
    start, end = per_step_columns(
        np.concatenate(ranks),
        np.concatenate(steps),
        np.concatenate(kinds),
        np.concatenate(orders),
        np.concatenate(partners),
        np.concatenate(row_costs),
        costs.p2p,
        model,
        rank_offset,
        max(items[i][0].num_steps for i in group),
    )
    for j, i in enumerate(group):
        lo, hi = bounds[j], bounds[j + 1]
        out[i] = bubble(items[i][0], start[lo:hi], end[lo:hi])
