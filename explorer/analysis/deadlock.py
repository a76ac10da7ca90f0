"""Deadlock search under blocking pairwise P2P (DeepSpeed) and batched P2P (PyTorch).

When every wait points to the same or an earlier step (rendezvous pairs share their step,
sends come no later than their receives: true of all generated and DeepSpeed schedules), an
edge of the wait-for graph either stays inside a step or goes forward in steps, so a cycle
can only live inside one step. The search then keeps only the within-step edges and peels
them all at once, step by step in parallel (Kahn's algorithm in rounds: each round removes
every row with nothing left to wait for). Rounds are bounded by the longest chain inside one
step - a handful - however long the schedule. If rows are left over, the schedule deadlocks,
and the per-instruction simulator then gives each rank's exact stopping point (including ranks
that only wait, steps later, for a rank inside the cycle); the ranks they wait for give the
cycle. Schedules whose waits point to later steps go to that simulator directly.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from explorer.analysis.findings import Deadlock
from explorer.analysis.p2p import Matching
from explorer.analysis.p2p_models import (
    P2PModel,
    check_model,
    deadlock_from_heads,
    dependency_steps_ok,
    execution_order,
)
from explorer.analysis.reference import run
from explorer.schedules.instructions import Kind
from explorer.schedules.schedule import Schedule


def find_deadlock(
    schedule: Schedule, matching: Matching, model: P2PModel = "blocking"
) -> Optional[Deadlock]:
    """The deadlock under ``model``, or None when every rank finishes its stream."""
    check_model(model)
    if len(schedule) == 0:
        return None
    if (
        dependency_steps_ok(schedule, matching.partner, model)
        and not _stuck_rows(schedule, matching.partner, model).any()
    ):
        return None
    result = run(schedule, matching.partner, np.zeros(len(schedule)), 0.0, model)
    return (
        deadlock_from_heads(schedule, matching.partner, result.heads, model)
        if result.heads
        else None
    )


def _stuck_rows(schedule: Schedule, partner: np.ndarray, model: P2PModel) -> np.ndarray:
    """Rows that can never run, from within-step edges only (see the module docstring)."""
    n = len(schedule)
    kind = schedule.kind
    is_send = (kind == Kind.SEND_ACTIVATION) | (kind == Kind.SEND_GRAD)
    is_recv = (kind == Kind.RECV_ACTIVATION) | (kind == Kind.RECV_GRAD)
    node = np.arange(n)
    local = (partner >= 0) & (schedule.rank[np.maximum(partner, 0)] == schedule.rank)
    if model == "blocking":
        node = np.where(
            is_recv & (partner >= 0) & ~local, partner, node
        )  # a pair is one rendezvous
    order = execution_order(schedule, model)
    same = (schedule.rank[order][1:] == schedule.rank[order][:-1]) & (
        schedule.step[order][1:] == schedule.step[order][:-1]
    )
    u = node[order[:-1][same]]
    v = node[order[1:][same]]
    # Receives wait for their send (batched pairs, and local hand-offs under either model);
    # only waits inside one step can close a cycle.
    recv_rows = np.nonzero(is_recv & (partner >= 0) & (local | (model == "batched")))[0]
    recv_rows = recv_rows[schedule.step[partner[recv_rows]] == schedule.step[recv_rows]]
    u = np.r_[u, partner[recv_rows]]
    v = np.r_[v, recv_rows]
    keep = u != v
    u, v = u[keep], v[keep]
    never = (is_send | is_recv) & (partner < 0)
    if model == "batched":
        never &= is_recv
    indeg = np.bincount(v, minlength=n)
    indeg[node[never]] += 1
    alive = node == np.arange(n)  # only representatives are graph nodes
    done = np.zeros(n, dtype=bool)
    frontier = alive & (indeg == 0)
    while frontier.any():
        done |= frontier
        hit = frontier[u]
        if hit.any():
            indeg -= np.bincount(v[hit], minlength=n)
            u, v = u[~hit], v[~hit]
        frontier = alive & ~done & (indeg == 0)
    return ~done[node]


__all__ = ["find_deadlock"]
