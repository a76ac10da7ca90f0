"""Timeline simulation: start and end of every instruction under per-instruction costs.

Costs are per instruction kind (``F``, ``B``, ``I``, ``W``, time inside a send or receive call,
P2P latency...). A rank runs its stream in order; under ``blocking`` P2P a pair starts when
both ends are ready and occupies both for the latency (plus each side's time in its call);
under ``batched`` a send occupies its rank for the send cost and the receive starts no earlier
than the send's end plus the latency, then occupies its rank for the receive cost.

Fast path: when every wait points to the same or an earlier step, step ``t`` depends only on
earlier steps and on itself, so steps are processed in order, all ranks at once, as small dense (slot x rank)
blocks: a rank's row is a max-plus scan - ``end_k = A_k + max(clock, max_{j<=k} (dep_j -
A'_j))`` with ``A``/``A'`` the inclusive/exclusive prefix costs - and the P2P dependencies
inside the step are iterated to their fixed point (two or three rounds). Other schedules use
the per-instruction simulator, which is also the oracle the property tests compare with.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar, Mapping

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.exchanges import exchanges, kind_codes, kinds_in
from explorer.pipeline.analysis.findings import Bubble
from explorer.pipeline.analysis.gradients import trains
from explorer.pipeline.analysis.kernels import compiled
from explorer.pipeline.analysis.p2p import Matching
from explorer.pipeline.analysis.p2p_models import (
    P2PModel,
    check_model,
    dependency_steps_ok,
    execution_order,
    is_identity_order,
)
from explorer.pipeline.analysis.peaks import peak_per_group
from explorer.pipeline.analysis.reference import run
from explorer.pipeline.analysis.step_walk import StepGrid, Waits, walk_numpy
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule


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

    @classmethod
    def of(cls, values: Mapping[str, float]) -> "Costs":
        """Costs named by field (``{"forward": 1.5, ...}``, the defaults for the rest), no per-rank ones."""
        return replace(cls(), **values)

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
    unmatched = (partner < 0) & (exchanges(schedule).cls > 0)
    if not unmatched.any() and dependency_steps_ok(schedule, partner, model):
        start, end = _per_step(schedule, partner, row_cost, costs.p2p, model)
    else:
        result = run(schedule, partner, row_cost, costs.p2p, model)
        if result.heads:
            raise ValueError("the schedule deadlocks; see explorer.pipeline.analysis.find_deadlock")
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
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`per_step_columns` on ``schedule``'s columns."""
    return per_step_columns(
        schedule.rank,
        schedule.step,
        schedule.kind,
        execution_order(schedule, model),
        partner,
        row_cost,
        latency,
        model,
        schedule.num_ranks,
        schedule.num_steps,
        exchange=exchanges(schedule).cls,
    )


def per_step_columns(
    rank_of_row: np.ndarray,
    step_of_row: np.ndarray,
    kind_of_row: np.ndarray,
    order: np.ndarray,
    partner: np.ndarray,
    row_cost: np.ndarray,
    latency: float,
    model: P2PModel,
    num_ranks: int,
    num_steps: int,
    exchange: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of every row, one step at a time over a dense ``(step, slot, rank)`` grid.

    Takes bare columns (rows sorted by rank then step, ``order`` the execution order) so that
    several schedules laid side by side on disjoint ranks can be walked in one pass
    (:mod:`.timelines`).

    The fast path of :func:`simulate`, valid when :func:`dependency_steps_ok` holds (every wait
    points to the same or an earlier step); :func:`explorer.pipeline.analysis.reference.run` is the
    plain walk it must agree with. A row's *slot* is its position among the rows its rank
    performs in that step (in execution order), counted from 1; steps with fewer rows leave
    free slots of cost 0. Slot 0 is the rank's clock, a free slot whose lower bound is the end
    of the rank's previous step.

    Inside a step a rank runs its slots back to back, so a slot starts at the latest of its own
    lower bound and the end of the slot before it. With ``before`` the cost of the slots before
    each slot, that is ``max.accumulate(bound - before) + before`` for a whole step at once. The
    lower bounds are: for slot 0, the end of the rank's last slot in the previous step; for a
    receive, its send's end plus the latency (no latency for a hand-off between stages of one
    rank); for each end of a blocking rendezvous, the moment its partner reaches the call (the
    end of the slot before it). Every bound is some cell's start plus a delay. Bounds that
    point to an earlier step are known before the step starts: each cell names the cell it
    reads (a constant -inf cell when nothing bounds it), so a step is one gather and one scan.
    Bounds inside a step depend on starts in the same step and are raised in rounds until
    nothing moves (at most one round per cell of the step, plus two).

    Where the compiled kernels are built (:mod:`.kernels`) all of this runs in C from the rows,
    the same operations in the same order (the same floats); :func:`_per_step_numpy` is its
    oracle and the fallback.
    """
    if exchange is None:  # per row: 0, _SEND or _RECV (a schedule's own is kept with it)
        exchange = _EXCHANGE[kind_of_row.astype(np.intp)]
    module = compiled()
    if module is not None and len(rank_of_row):
        row_start, row_end = np.empty(len(rank_of_row)), np.empty(len(rank_of_row))
        module.per_step(
            np.ascontiguousarray(rank_of_row, dtype=np.int64),
            np.ascontiguousarray(step_of_row, dtype=np.int64),
            np.ascontiguousarray(order, dtype=np.int64),
            np.ascontiguousarray(exchange).astype(np.uint8, copy=False),
            np.ascontiguousarray(partner, dtype=np.int64),
            np.ascontiguousarray(row_cost, dtype=np.float64),
            row_start,
            row_end,
            float(latency),
            model == "blocking",
            is_identity_order(order),
            num_ranks,
            num_steps,
        )
        return row_start, row_end
    return _per_step_numpy(
        rank_of_row,
        step_of_row,
        exchange,
        order,
        partner,
        row_cost,
        latency,
        model,
        num_ranks,
        num_steps,
    )


def _per_step_numpy(
    rank: np.ndarray,
    step: np.ndarray,
    exchange: np.ndarray,
    order: np.ndarray,
    partner: np.ndarray,
    row_cost: np.ndarray,
    latency: float,
    model: P2PModel,
    num_ranks: int,
    num_steps: int,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`per_step_columns` in numpy: the compiled version's oracle and its fallback."""
    cell_of_row, num_slots = _cells(rank, step, order, num_ranks)
    cells_per_step = num_ranks * num_slots
    cells = num_steps * cells_per_step
    is_recv = exchange == _RECV
    # Only exchanges wait; a rendezvous (blocking, between two ranks) waits both ways.
    waits = np.flatnonzero(exchange if model == "blocking" else is_recv)
    partner_rank = rank[partner[waits]]  # every waiting exchange has a partner here
    local = partner_rank == rank[waits]
    rendezvous = np.zeros(len(rank), dtype=bool)
    if model == "blocking":
        rendezvous[waits[~local]] = True
        waits = waits[~local | is_recv[waits]]  # a local send waits for nothing
        local = rank[partner[waits]] == rank[waits]
    # sends and receives: the time spent inside the call (and the latency of a rendezvous)
    if model == "blocking":
        row_cost = np.where(rendezvous, row_cost + latency, row_cost)
    cost = np.zeros(cells)
    cost[cell_of_row] = row_cost
    # A receive's data arrives at its send's end plus the latency (none for a local hand-off).
    # A rendezvous end waits for its partner to arrive: the end of the slot before the partner.
    wait_cell = cell_of_row[waits]
    wait_src = cell_of_row[partner[waits]] - rendezvous[waits] * num_ranks  # the slot before
    wait_delay = np.where(rendezvous[waits] | local, 0.0, latency) + cost[wait_src]
    wait_step = step[waits]
    in_step = wait_src >= wait_step.astype(np.int64) * cells_per_step
    # Waits inside a step, grouped by step: step t has [bounds[t], bounds[t + 1]).
    inner = np.flatnonzero(in_step)
    if len(inner):
        earlier = np.flatnonzero(~in_step)
        inner = inner[np.argsort(wait_step[inner], kind="stable")]
        wait_cell, inner_cell = wait_cell[earlier], wait_cell[inner]
        wait_src, inner_src = wait_src[earlier], wait_src[inner]
        wait_delay, inner_delay = wait_delay[earlier], wait_delay[inner]
    else:
        inner_cell = inner_src = np.zeros(0, dtype=np.intp)
        inner_delay = np.zeros(0)
    bounds = np.searchsorted(wait_step[inner], np.arange(num_steps + 1))
    start = walk_numpy(
        StepGrid(num_steps, num_slots, num_ranks, cost),
        Waits(wait_cell, wait_src, wait_delay),
        Waits(inner_cell, inner_src, inner_delay),
        bounds,
    )
    row_start = start[cell_of_row]
    row_end = row_start + row_cost
    return row_start, row_end


def _cells(
    rank: np.ndarray, step: np.ndarray, order: np.ndarray, num_ranks: int
) -> tuple[np.ndarray, int]:
    """Each row's cell in the ``(step, rank, slot)`` grid (intp: the loop's gathers take it
    without a cast) and the number of slots.

    Rows are grouped by (rank, step) and ``order`` only reorders inside a group, so a row's slot
    is its position in ``order`` less its group's first row, plus one (slot 0 is the clock): its
    cell is its position plus one offset per group, spread over the group's rows by one repeat.
    """
    rows = len(rank)
    opens = np.empty(rows, dtype=bool)
    opens[0] = True
    opens[1:] = (rank[1:] != rank[:-1]) | (step[1:] != step[:-1])
    firsts = np.flatnonzero(opens)
    sizes = np.diff(firsts, append=rows)
    num_slots = int(sizes.max()) + 1
    # cell = (step * slots + slot) * ranks + rank, with slot = position - first + 1
    base = (step[firsts].astype(np.intp) * num_slots + 1 - firsts) * num_ranks + rank[firsts]
    if is_identity_order(order):  # the usual case: a row's position is its index
        cell = np.arange(0, rows * num_ranks, num_ranks, dtype=np.intp)
    else:
        cell = np.empty(rows, dtype=np.intp)
        cell[order] = np.arange(0, rows * num_ranks, num_ranks)
    cell += np.repeat(base, sizes)
    return cell, num_slots


_SEND, _RECV = 1, 2
#: Change in held activations per kind, on a stage without (first half) and with (second
#: half) split backwards.
_HOLD_DELTA = np.zeros(2 * len(Kind), dtype=np.int8)
_HOLD_DELTA[[Kind.FORWARD, len(Kind) + Kind.FORWARD]] = 1
_HOLD_DELTA[[Kind.BACKWARD, len(Kind) + Kind.BACKWARD_WEIGHT]] = -1
_EXCHANGE = np.zeros(len(Kind), dtype=np.int8)
_EXCHANGE[[Kind.SEND_ACTIVATION, Kind.SEND_GRAD]] = _SEND
_EXCHANGE[[Kind.RECV_ACTIVATION, Kind.RECV_GRAD]] = _RECV


def bubble(schedule: Schedule, start: np.ndarray, end: np.ndarray) -> Bubble:
    """Idle share of the timeline with both denominators (see :class:`Bubble`)."""
    makespan = float(np.nanmax(end)) if len(end) else 0.0
    # The compute kinds are consecutive: one byte comparison, no table lookup.
    compute = np.flatnonzero(kinds_in(schedule.kind, Kind.FORWARD, Kind.BACKWARD_WEIGHT))
    busy = np.bincount(
        schedule.rank[compute], weights=end[compute] - start[compute], minlength=schedule.num_ranks
    )
    ranks = max(schedule.num_ranks, 1)
    total = ranks * makespan
    mean_busy = float(busy.mean()) if len(busy) else 0.0
    of_total = float(1 - busy.sum() / total) if total > 0 else 0.0
    of_ideal = float((makespan - mean_busy) / mean_busy) if mean_busy > 0 else None
    return Bubble(
        makespan=makespan,
        busy_per_rank=tuple(float(b) for b in busy),
        of_total=of_total,
        of_ideal=of_ideal,
    )


def peak_activations(schedule: Schedule) -> list[int]:
    """Per stage, the most micro-batches between their forward and their last backward part;
    in a forward-only schedule, between their forward and the send of its output (the last
    stage sends nothing: one at a time), as :mod:`.memory` frees them."""
    codes = kind_codes(schedule.kind)
    if not trains(schedule):
        delta = (codes == Kind.FORWARD).view(np.int8) - (codes == Kind.SEND_ACTIVATION).view(
            np.int8
        )
        last = np.zeros(schedule.num_stages, dtype=bool)
        last[schedule.stage[codes == Kind.FORWARD]] = True
        last[schedule.stage[codes == Kind.SEND_ACTIVATION]] = False  # stages that send keep theirs
        return [
            1 if keeps_none else peak for peak, keeps_none in zip(_peaks(schedule, delta), last)
        ]
    split = np.zeros(schedule.num_stages, dtype=bool)
    split[schedule.stage[codes == Kind.BACKWARD_WEIGHT]] = True
    # +1 at a forward, -1 at the backward part that releases (W on a split stage, else B).
    if split.any():
        kind = schedule.kind.astype(np.intp)  # an intp index: numpy's fast path for the lookups
        delta = _HOLD_DELTA[split[schedule.stage.astype(np.intp)] * len(Kind) + kind]
    else:  # byte comparisons, no table lookup
        delta = (codes == Kind.FORWARD).view(np.int8) - (codes == Kind.BACKWARD).view(np.int8)
    return _peaks(schedule, delta)


def _peaks(schedule: Schedule, delta: np.ndarray) -> list[int]:
    """Per stage, the highest running sum of ``delta`` (+1 holds a micro-batch, -1 frees one)."""
    rows = np.flatnonzero(delta)
    stage, delta = schedule.stage[rows], delta[rows].astype(np.int64)
    if len(rows) > 1 and not (stage[1:] >= stage[:-1]).all():  # one stage per rank: sorted
        order = np.argsort(stage, kind="stable")  # rows are in stream order already
        stage, delta = stage[order], delta[order]
    return peak_per_group(stage, delta, schedule.num_stages)


__all__ = ["Costs", "Timeline", "simulate", "bubble", "peak_activations"]
