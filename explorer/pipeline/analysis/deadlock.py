"""Deadlock search under blocking pairwise P2P (DeepSpeed) and batched P2P (PyTorch).

When every wait points to the same or an earlier step (rendezvous pairs share their step,
sends come no later than their receives: true of all generated and DeepSpeed schedules), an
edge of the wait-for graph either stays inside a step or goes forward in steps, so a cycle
can only live inside one step. The search then keeps only the within-step edges and peels
them all at once, step by step in parallel (Kahn's algorithm in rounds: each round removes
every row with nothing left to wait for). Rounds are bounded by the longest chain inside one
step - a handful - however long the schedule. If rows are left over, the schedule deadlocks,
and each rank's exact stopping point (including ranks that only wait, steps later, for a rank
inside the cycle) is the fixed point of :func:`stuck_heads`; the ranks they wait for give the
cycle. Schedules whose waits point to later steps (1F1B under blocking P2P: a send's receive
is posted a step later) go to :func:`walk_heads`, the per-instruction walk reading each
stream only as far as its rank gets. Both equal :func:`explorer.pipeline.analysis.reference.run`'s
stopping points (a property test checks it).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from explorer.pipeline.analysis.exchanges import exchanges
from explorer.pipeline.analysis.findings import Deadlock
from explorer.pipeline.analysis.p2p import Matching
from explorer.pipeline.analysis.p2p_models import (
    P2PModel,
    check_model,
    deadlock_from_heads,
    dependency_steps_ok,
    execution_order,
)
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule


def find_deadlock(
    schedule: Schedule, matching: Matching, model: P2PModel = "blocking"
) -> Optional[Deadlock]:
    """The deadlock under ``model``, or None when every rank finishes its stream."""
    check_model(model)
    if len(schedule) == 0:
        return None
    partner = matching.partner
    if dependency_steps_ok(schedule, partner, model):
        stuck = _stuck_rows(schedule, partner, model)
        if not stuck.any():
            return None
        heads = stuck_heads(schedule, partner, model, stuck)
    else:
        heads = walk_heads(schedule, partner, model)
    return deadlock_from_heads(schedule, partner, heads, model) if heads else None


def stuck_heads(
    schedule: Schedule, partner: np.ndarray, model: P2PModel, stuck: np.ndarray
) -> dict[int, int]:
    """Each rank's first row it never completes, given the rows stuck inside their own step.

    What :func:`explorer.pipeline.analysis.reference.run` reports as ``heads``, without walking the
    streams. A rank stops at its first stuck row (or at an exchange without a partner, where
    the walk stops too); every row after it on that rank never runs either, and neither does
    any row on another rank that waits for one of them: a receive whose send never runs
    (batched) or either end of a rendezvous whose other end is never reached (blocking).
    Each rank's head (a position in its stream) only moves earlier, so propagating over the
    cross-rank waits until nothing moves ends; the rows at or after the heads are then exactly
    the rows the walk never runs, because every wait points to the same or an earlier step
    (see the module docstring), and the heads are its stopping points.
    """
    n = len(schedule)
    order = execution_order(schedule, model)
    rank_in_order = schedule.rank[order]
    bounds = np.searchsorted(rank_in_order, np.arange(schedule.num_ranks + 1))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    facts = exchanges(schedule)
    # A rank's head is a position in ``order``; the end of its range means "never stuck".
    head = bounds[1:].copy()
    seeds = np.sort(pos[stuck | ((facts.cls > 0) & (partner < 0))])
    head[rank_in_order[seeds[::-1]]] = seeds[::-1]  # the last write wins: the smallest
    # Cross-rank waits, as (source position, waiting position): a receive waits for its send;
    # under blocking each end of a rendezvous waits for the other to be reached.
    recv = facts.recvs[partner[facts.recvs] >= 0]
    send = partner[recv]
    cross = schedule.rank[send] != schedule.rank[recv]
    src, dst = pos[send[cross]], pos[recv[cross]]
    if model == "blocking":
        src, dst = np.r_[src, dst], np.r_[dst, src]
    by = np.argsort(dst, kind="stable")
    src, dst = src[by], dst[by]
    src_rank, dst_rank = rank_in_order[src], rank_in_order[dst]
    while True:
        live = dst < head[dst_rank]  # waits whose waiting row may still run
        src, dst, src_rank, dst_rank = src[live], dst[live], src_rank[live], dst_rank[live]
        blocked = src >= head[src_rank]
        if not blocked.any():
            break
        moved = dst[blocked][::-1]  # ascending positions, reversed: the smallest per rank wins
        head[rank_in_order[moved]] = moved
    return {r: int(order[head[r]]) for r in range(schedule.num_ranks) if head[r] < bounds[r + 1]}


def _stuck_rows(schedule: Schedule, partner: np.ndarray, model: P2PModel) -> np.ndarray:
    """Rows that can never run, from within-step edges only (see the module docstring)."""
    n = len(schedule)
    facts = exchanges(schedule)
    matched = facts.recvs[partner[facts.recvs] >= 0]
    # Receives wait for their send (batched pairs, and local hand-offs under either model);
    # only waits inside one step can close a cycle. Rows that never run: unmatched exchanges,
    # under either model. A batched send does not wait for its receive to be posted, but the
    # batch's wait never returns for a send nobody receives: the simulator's walk stops there,
    # and the search once passed it (``check --model batched`` then raised in the simulator).
    local = schedule.rank[partner[matched]] == schedule.rank[matched]
    never = np.flatnonzero((facts.cls > 0) & (partner < 0))
    recv_rows = matched if model == "batched" else matched[local]
    recv_rows = recv_rows[schedule.step[partner[recv_rows]] == schedule.step[recv_rows]]
    if model == "batched" and not len(recv_rows) and not len(never):
        # Without waits inside a step only each rank's own order is left: no cycle.
        return np.zeros(n, dtype=bool)
    node = np.arange(n)
    if model == "blocking":
        pairs = matched[~local]
        node[pairs] = partner[pairs]  # a pair is one rendezvous
    order = execution_order(schedule, model)
    same = (schedule.rank[order][1:] == schedule.rank[order][:-1]) & (
        schedule.step[order][1:] == schedule.step[order][:-1]
    )
    u = node[order[:-1][same]]
    v = node[order[1:][same]]
    u = np.r_[u, partner[recv_rows]]
    v = np.r_[v, recv_rows]
    keep = u != v
    u, v = u[keep], v[keep]
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


__all__ = ["find_deadlock", "stuck_heads", "walk_heads"]


def walk_heads(schedule: Schedule, partner: np.ndarray, model: P2PModel) -> dict[int, int]:
    """The ``heads`` of :func:`explorer.pipeline.analysis.reference.run`, walking only as far as needed.

    The same walk - each rank runs its stream until an exchange cannot proceed, round after
    round until nobody moves - but with zero costs there are no clocks to keep, so a rank
    jumps from one exchange that may wait (a *gate*) to the next, and each rank's gates are
    found in growing chunks of its stream, only as far as the rank gets. A schedule that
    deadlocks early (1F1B under blocking P2P stops in its first steps) then costs a few
    thousand Python steps, not a conversion of every column of every row.

    A gate needs: never (an exchange without a partner), its partner's rank to stand at the
    partner (either end of a blocking rendezvous between two ranks, which then both move
    on), or its partner's rank to be past the partner (a receive waiting for its send).
    Positions are indices into the execution order, whose ranks are contiguous.
    """
    order = execution_order(schedule, model)
    bounds = np.searchsorted(schedule.rank, np.arange(schedule.num_ranks + 1))
    if model == "blocking":
        pos = order  # the identity
    else:
        pos = np.empty(len(schedule), dtype=np.int64)
        pos[order] = np.arange(len(schedule))
    blocking = model == "blocking"
    at = bounds[:-1].tolist()  # each rank's position
    ends = bounds[1:].tolist()
    scanned = list(at)  # how far each rank's gates have been read
    gates: list[list[list[int]]] = [[] for _ in at]
    taken = [0] * len(at)  # gates[r][:taken[r]] are passed

    def more(r: int) -> bool:
        """Read the next chunk of rank ``r``'s stream that holds a gate; False at its end."""
        while scanned[r] < ends[r]:
            lo = scanned[r]
            hi = min(ends[r], lo + max(256, 2 * (lo - bounds[r])))
            scanned[r] = hi
            rows = order[lo:hi]
            cls = _CLASS[schedule.kind[rows]]
            ex = np.flatnonzero(cls)
            if not len(ex):
                continue
            q = partner[rows[ex]]
            matched = q >= 0
            q_pos = np.where(matched, pos[np.maximum(q, 0)], -1)
            q_rank = schedule.rank[np.maximum(q, 0)]
            need = np.where(matched, _AFTER * (cls[ex] == _RECV), _NEVER)
            if blocking:
                need = np.where(matched & (q_rank != r), _MEET, need)
            keep = need > 0
            if keep.any():
                table = np.stack([ex + lo, need, q_pos, q_rank], axis=1)[keep]
                gates[r] = table.tolist()
                taken[r] = 0
                return True
        return False

    active = True
    while active:
        active = False
        for r in range(len(at)):
            while True:
                if taken[r] == len(gates[r]) and not more(r):
                    if at[r] != ends[r]:
                        at[r], active = ends[r], True
                    break
                g, needs, q, rq = gates[r][taken[r]]
                if g < at[r]:  # passed already: the other end of a rendezvous moved it on
                    taken[r] += 1
                    continue
                if at[r] != g:
                    at[r], active = g, True
                if needs == _NEVER or (needs == _AFTER and at[rq] <= q):
                    break
                if needs == _MEET:
                    if at[rq] != q:
                        break
                    at[rq] = q + 1
                at[r], active = g + 1, True
                taken[r] += 1
    return {r: int(order[at[r]]) for r in range(len(at)) if at[r] < ends[r]}


_NEVER, _MEET, _AFTER = 1, 2, 3
_SEND, _RECV = 1, 2
_CLASS = np.zeros(len(Kind), dtype=np.int8)
_CLASS[[Kind.SEND_ACTIVATION, Kind.SEND_GRAD]] = _SEND
_CLASS[[Kind.RECV_ACTIVATION, Kind.RECV_GRAD]] = _RECV
