"""Timeline simulation: start and end of every instruction under per-instruction costs.

Costs are per instruction kind (``F``, ``B``, ``I``, ``W``, time inside a send or receive call,
P2P latency...). A rank runs its stream in order; under ``blocking`` P2P a pair starts when
both ends are ready and occupies both for the latency (plus each side's time in its call);
under ``batched`` a send occupies its rank for the send cost and the receive starts no earlier
than the send's end plus the latency, then occupies its rank for the receive cost.

Fast path: when every wait points to the same or an earlier step, step ``t`` depends only on
earlier steps and on itself, so steps are processed in order, all ranks at once, as small dense (rank x slot)
blocks: a rank's row is a max-plus scan - ``end_k = A_k + max(clock, max_{j<=k} (dep_j -
A'_j))`` with ``A``/``A'`` the inclusive/exclusive prefix costs - and the P2P dependencies
inside the step are iterated to their fixed point (two or three rounds). Other schedules use
the per-instruction simulator, which is also the oracle the property tests compare with.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

import numpy as np

from explorer.analysis.findings import Bubble
from explorer.analysis.p2p import Matching
from explorer.analysis.p2p_models import (
    P2PModel,
    check_model,
    dependency_steps_ok,
    execution_order,
)
from explorer.analysis.peaks import peak_per_group
from explorer.analysis.reference import run
from explorer.errors import InputError
from explorer.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.schedules.schedule import Schedule


@dataclass(frozen=True)
class Costs:
    """Time per instruction kind, in any unit (the views say "ticks")."""

    forward: float = 1.0
    backward: float = 2.0
    backward_input: float = 1.0
    backward_weight: float = 1.0
    p2p: float = (
        0.0  # latency: from the start of a rendezvous, or from a send's end to its data's arrival
    )
    send: float = 0.0  # time a rank spends inside a send call (measured runs show it is not free)
    recv: float = 0.0  # time a rank spends inside a receive call once the data is there
    load: float = 0.0
    reduce: float = 0.0
    optimizer: float = 0.0
    #: Ranks whose costs differ: ``((rank, (("send", 6.2), ...)), ...)``, made by :meth:`with_rank`.
    #: Measured runs need it: on a loaded CPU one rank's sends can be 100x slower than another's.
    rank_overrides: tuple = ()
    #: Largest cost accepted: a schedule's sum of costs (millions of instructions) stays finite and exact enough.
    MAX: ClassVar[float] = 1e12

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name != "rank_overrides":
                _check_cost(f.name, getattr(self, f.name))
        names = {f.name for f in fields(self)} - {"rank_overrides", "p2p"}
        for rank, values in self.rank_overrides:
            for name, value in values:
                if name not in names:
                    raise InputError(
                        f"rank {rank}: {name!r} is not a per-rank cost; use one of {', '.join(sorted(names))}"
                    )
                _check_cost(f"{name} on rank {rank}", value)

    def with_rank(self, rank: int, **values: float) -> "Costs":
        """These costs, with ``values`` (e.g. ``send=6.2``) replacing the defaults on ``rank``."""
        kept = tuple((r, v) for r, v in self.rank_overrides if r != rank)
        return replace(self, rank_overrides=kept + ((int(rank), tuple(sorted(values.items()))),))

    def row_costs(self, schedule: Schedule) -> np.ndarray:
        """The cost of every row of ``schedule`` (per kind, then the per-rank exceptions)."""
        kinds = schedule.kind.astype(np.int64)
        cost = self.by_kind()[kinds]
        for rank, values in self.rank_overrides:
            rows = schedule.rank == rank
            cost[rows] = replace(self, rank_overrides=(), **dict(values)).by_kind()[kinds[rows]]
        return cost

    def by_kind(self) -> np.ndarray:
        """Cost of each :class:`Kind`, indexed by its value (the latency is added by the simulation)."""
        table = np.zeros(len(Kind))
        table[Kind.LOAD] = self.load
        table[Kind.FORWARD] = self.forward
        table[Kind.BACKWARD] = self.backward
        table[Kind.BACKWARD_INPUT] = self.backward_input
        table[Kind.BACKWARD_WEIGHT] = self.backward_weight
        table[Kind.REDUCE_GRADS] = self.reduce
        table[Kind.REDUCE_TIED_GRADS] = self.reduce
        table[Kind.OPTIMIZER_STEP] = self.optimizer
        table[Kind.SEND_ACTIVATION] = table[Kind.SEND_GRAD] = self.send
        table[Kind.RECV_ACTIVATION] = table[Kind.RECV_GRAD] = self.recv
        return table


def _check_cost(name: str, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or value != value
        or value < 0
    ):
        raise InputError(f"cost {name} must be a non-negative number, got {value!r}")
    if value > Costs.MAX:  # also infinity; a huge int compares exactly, no float overflow
        raise InputError(
            f"cost {name} must be finite and at most {Costs.MAX:g} (so sums over a schedule stay "
            f"finite), got {value!r}"
        )


@dataclass(frozen=True)
class Timeline:
    """Simulated start/end per row of the schedule, and what follows from them."""

    start: np.ndarray
    end: np.ndarray
    model: P2PModel
    costs: Costs
    bubble: Bubble
    #: Per stage, the most micro-batches holding activations at once (forward to last backward).
    peak_activations: tuple[int, ...]

    @property
    def makespan(self) -> float:
        return self.bubble.makespan


def simulate(
    schedule: Schedule, matching: Matching, costs: Costs = Costs(), model: P2PModel = "blocking"
) -> Timeline:
    """Simulate ``schedule``; raises ``ValueError`` if it deadlocks (check first)."""
    check_model(model)
    row_cost = costs.row_costs(schedule)
    partner = matching.partner
    unmatched = np.isin(
        schedule.kind, (Kind.SEND_ACTIVATION, Kind.SEND_GRAD, Kind.RECV_ACTIVATION, Kind.RECV_GRAD)
    ) & (partner < 0)
    if not unmatched.any() and dependency_steps_ok(schedule, partner, model):
        start, end = _per_step(schedule, partner, row_cost, costs.p2p, model)
    else:
        result = run(schedule, partner, row_cost, costs.p2p, model)
        if result.heads:
            raise ValueError("the schedule deadlocks; see explorer.analysis.find_deadlock")
        start, end = result.start, result.end
    return Timeline(
        start=start,
        end=end,
        model=model,
        costs=costs,
        bubble=bubble(schedule, start, end),
        peak_activations=tuple(peak_activations(schedule)),
    )


def _per_step(
    schedule: Schedule, partner: np.ndarray, row_cost: np.ndarray, latency: float, model: P2PModel
):
    n = len(schedule)
    order = execution_order(schedule, model)
    rank, step, kind = schedule.rank[order], schedule.step[order], schedule.kind[order]
    new_group = np.r_[True, (rank[1:] != rank[:-1]) | (step[1:] != step[:-1])]
    group_first = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    slot = np.arange(n) - group_first
    R, T, K = schedule.num_ranks, schedule.num_steps, int(slot.max()) + 1
    cell = (
        step.astype(np.int64) * R + rank
    ) * K + slot  # dense (step, rank, slot) position of each ordered row
    where = np.empty(n, dtype=np.int64)
    where[order] = cell  # row -> dense position

    is_send = (kind == Kind.SEND_ACTIVATION) | (kind == Kind.SEND_GRAD)
    is_recv = (kind == Kind.RECV_ACTIVATION) | (kind == Kind.RECV_GRAD)
    partner_o = partner[order]
    local = (partner_o >= 0) & (schedule.rank[np.maximum(partner_o, 0)] == rank)
    rendezvous = (is_send | is_recv) & ~local & (model == "blocking")
    cost = np.zeros(T * R * K)
    base_cost = row_cost[order].copy()  # sends and receives: the time spent inside the call
    base_cost[rendezvous] += latency
    cost[cell] = base_cost
    cost = cost.reshape(T, R, K)
    incl = np.cumsum(cost, axis=2)
    excl = incl - cost
    # Each P2P row that waits: both ends of a rendezvous wait for each other's readiness (same
    # step); a receive otherwise waits for its send's end (same or earlier step) plus the
    # latency, unless the hand-off is local. Waits on earlier steps are known before the step
    # starts; only waits inside a step need the fixed-point rounds.
    RK = R * K
    waiting = rendezvous | (is_recv & ~rendezvous)
    d_cell = cell[waiting]
    d_src = where[partner[order[waiting]]]
    d_rdv = rendezvous[waiting]
    # A receive's data arrives at its send's end plus the latency (none for a local hand-off).
    d_wait = np.where(local[waiting], 0.0, latency) + np.where(d_rdv, 0.0, cost.reshape(-1)[d_src])
    d_step = d_cell // RK
    inside = (d_src // RK) == d_step
    by = np.lexsort(
        (d_cell, inside, d_step)
    )  # per step: earlier-step waits first, then in-step waits
    d_cell, d_src, d_rdv, d_wait, d_step, inside = (
        x[by] for x in (d_cell, d_src, d_rdv, d_wait, d_step, inside)
    )
    steps = np.arange(T + 1)
    first = np.searchsorted(d_step, steps)
    split = np.searchsorted(d_step * 2 + inside, steps * 2 + 1)
    local_cell = d_cell - d_step * RK
    local_src = d_src - d_step * RK

    start_all = np.zeros((T, R, K))
    flat_all = start_all.reshape(-1)
    clock = np.zeros(R)
    neg = -np.inf
    dep = np.empty((R, K))
    dep_flat = dep.reshape(-1)
    last_cost = cost[:, :, -1]
    bounds = list(zip(first[:-1].tolist(), split[:-1].tolist(), first[1:].tolist()))
    for t, (lo, mid, hi) in enumerate(bounds):
        a_ex = excl[t]
        dep.fill(neg)
        if mid > lo:
            dep_flat[local_cell[lo:mid]] = flat_all[d_src[lo:mid]] + d_wait[lo:mid]
        np.maximum(dep[:, 0], clock, out=dep[:, 0])  # the rank's clock bounds its first slot
        start = start_all[t]
        np.subtract(dep, a_ex, out=start)
        np.maximum.accumulate(start, axis=1, out=start)
        start += a_ex
        if hi > mid:
            c = cost[t]
            cells, src = local_cell[mid:hi], local_src[mid:hi]
            rdv, wait = d_rdv[mid:hi], d_wait[mid:hi]
            for _ in range(RK + 2):
                ready = np.concatenate([clock[:, None], (start + c)[:, :-1]], axis=1).reshape(-1)
                new = np.where(rdv, ready[src], start.reshape(-1)[src] + wait)
                cur = dep_flat[cells]
                if (new <= cur).all():
                    break
                dep_flat[cells] = np.maximum(cur, new)
                np.subtract(dep, a_ex, out=start)
                np.maximum.accumulate(start, axis=1, out=start)
                start += a_ex
        clock = start[:, -1] + last_cost[t]
    flat_start = flat_all[where]
    flat_end = flat_start + cost.reshape(-1)[where]
    return flat_start, flat_end


def bubble(schedule: Schedule, start: np.ndarray, end: np.ndarray) -> Bubble:
    """Idle share of the timeline with both denominators (see :class:`Bubble`)."""
    makespan = float(np.nanmax(end)) if len(end) else 0.0
    compute = np.isin(schedule.kind, [int(k) for k in COMPUTE_KINDS])
    busy = np.bincount(
        schedule.rank[compute], weights=(end - start)[compute], minlength=schedule.num_ranks
    )
    ranks = max(schedule.num_ranks, 1)
    total = ranks * makespan
    mean_busy = float(busy.mean()) if len(busy) else 0.0
    of_total = float(1 - busy.sum() / total) if total > 0 else 0.0
    of_ideal = float((makespan - mean_busy) / mean_busy) if mean_busy > 0 else 0.0
    return Bubble(
        makespan=makespan,
        busy_per_rank=tuple(float(b) for b in busy),
        of_total=of_total,
        of_ideal=of_ideal,
    )


def peak_activations(schedule: Schedule) -> list[int]:
    """Per stage, the most micro-batches between their forward and their last backward part."""
    kind = schedule.kind
    fwd = kind == Kind.FORWARD
    split = np.zeros(schedule.num_stages, dtype=bool)
    split[schedule.stage[kind == Kind.BACKWARD_WEIGHT]] = True
    release = np.where(split[schedule.stage], kind == Kind.BACKWARD_WEIGHT, kind == Kind.BACKWARD)
    delta = fwd.astype(np.int64) - release.astype(np.int64)
    rows = np.nonzero(delta)[0]
    order = np.argsort(schedule.stage[rows], kind="stable")  # rows are in stream order already
    return peak_per_group(schedule.stage[rows][order], delta[rows][order], schedule.num_stages)


__all__ = ["Costs", "Timeline", "simulate", "bubble", "peak_activations"]
