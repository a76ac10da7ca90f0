"""What each named straggler costs the job's step: the schedule simulated with and without it.

A straggler's slow instructions cost the step only where they lie on the critical path: a slow
backward in a stage that waits anyway costs nothing, one on the path costs all its extra time.
So the step is simulated (:func:`~explorer.pipeline.analysis.check.check`'s timeline, the
schedule's own dependencies and P2P model) from the work measured across replicas, once as the
healthy replicas run (every work kind at its job-wide median; a transfer's measured time is
mostly waiting, which the simulator makes itself, so transfers are free) and once with the
outlier's rank as measured (its kind at its ratio to the median: a slow rank; its receives or
sends that much later: a slow link). The difference is what that rank costs each step of its
replica. Data-parallel replicas meet at every step (their gradients are reduced together), so
the job's step is its slowest replica's: the outlier whose replica is slowest decides it, and
the others cost the job nothing beyond it. Pure numpy and the simulator; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.check import check
from explorer.pipeline.analysis.fold import Fold, Outlier
from explorer.pipeline.analysis.timeline import Costs
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.job import JobTrace

#: The simulator's cost field of each kind a straggler can be slow in.
_FIELD = {
    Kind.LOAD: "load",
    Kind.FORWARD: "forward",
    Kind.BACKWARD: "backward",
    Kind.BACKWARD_INPUT: "backward_input",
    Kind.BACKWARD_WEIGHT: "backward_weight",
    Kind.REDUCE_GRADS: "reduce",
    Kind.REDUCE_TIED_GRADS: "reduce",
    Kind.OPTIMIZER_STEP: "optimizer",
    Kind.SEND_ACTIVATION: "send",
    Kind.SEND_GRAD: "send",
    Kind.RECV_ACTIVATION: "recv",
    Kind.RECV_GRAD: "recv",
}
#: Kinds whose measured duration is work (a transfer's duration holds the wait for its peer,
#: which the simulator makes itself, so transfers cost nothing at the medians).
_WORK = (
    Kind.LOAD,
    Kind.FORWARD,
    Kind.BACKWARD,
    Kind.BACKWARD_INPUT,
    Kind.BACKWARD_WEIGHT,
    Kind.REDUCE_GRADS,
    Kind.REDUCE_TIED_GRADS,
    Kind.OPTIMIZER_STEP,
)


@dataclass(frozen=True)
class StepCost:
    """One outlier's cost to its replica's step (milliseconds, simulated)."""

    outlier: Outlier
    healthy_ms: float  # the step at the medians
    with_ms: float  # the step with this rank as measured

    @property
    def cost_ms(self) -> float:
        return max(0.0, self.with_ms - self.healthy_ms)

    def sentence(self) -> str:
        return (
            f"rank {self.outlier.rank} costs its replica's step {self.cost_ms:.2f} ms "
            f"(the schedule's work {self.with_ms:.2f} ms a step with it, {self.healthy_ms:.2f} ms "
            "without)"
        )

    def to_dict(self) -> dict:
        return {
            "rank": self.outlier.rank,
            "healthy_ms": round(self.healthy_ms, 4),
            "with_ms": round(self.with_ms, 4),
            "cost_ms": round(self.cost_ms, 4),
            "sentence": self.sentence(),
        }


@dataclass(frozen=True)
class StepCosts:
    """Every outlier's cost, and the one that decides the job's step (None: no outlier)."""

    costs: tuple[StepCost, ...]

    @property
    def deciding(self) -> StepCost | None:
        return max(self.costs, key=lambda c: c.cost_ms) if self.costs else None

    def sentences(self) -> list[str]:
        if not self.costs:
            return []
        top = self.deciding
        assert top is not None
        lines = [
            "cost to the step (the schedule simulated with each kind's median work across "
            "replicas, transfers free; replicas meet at every step, so the slowest replica's "
            "step is the job's):"
        ]
        lines += [f"  {c.sentence()}" for c in self.costs]
        lines.append(
            f"  the job's step is decided by rank {top.outlier.rank}'s replica "
            f"{top.outlier.replica}: +{top.cost_ms:.2f} ms a step"
            + ("" if top.cost_ms > 0 else " (none: no straggler lies on the critical path)")
        )
        return lines

    def to_dict(self) -> dict:
        top = self.deciding
        return {
            "costs": [c.to_dict() for c in self.costs],
            "deciding_rank": None if top is None else top.outlier.rank,
        }


def medians_ms(job: JobTrace) -> dict[Kind, float]:
    """Each work kind's median duration over the whole job, in milliseconds."""
    dur = (job.end - job.start) * 1e3
    out = {}
    for kind in _WORK:
        pick = job.kind == int(kind)
        if pick.any():
            out[kind] = float(np.median(dur[pick]))
    return out


def step_costs(job: JobTrace, folded: Fold, schedule: Schedule) -> StepCosts:
    """Each outlier of ``folded`` costed on ``schedule`` (one replica's pipeline)."""
    if not folded.outliers:
        return StepCosts(())
    base = medians_ms(job)
    try:
        healthy = Costs.of({_FIELD[k]: v for k, v in base.items() if k != Kind.REDUCE_TIED_GRADS})
    except InputError:  # a median the simulator cannot take (not finite): nothing is costed
        return StepCosts(())
    healthy_ms = _step_ms(schedule, healthy)
    out = []
    for o in folded.outliers:
        try:
            local = int(job.layout.local_of(o.rank))
            costs = healthy.with_rank(local, **{_FIELD[o.kind]: _slow_ms(o, base)})
        except InputError:  # its ratio or delay is not a cost (infinite): left uncosted
            continue
        out.append(StepCost(o, healthy_ms, _step_ms(schedule, costs)))
    return StepCosts(tuple(out))


def _slow_ms(o: Outlier, base: dict[Kind, float]) -> float:
    """The outlier's cost of its kind: its ratio times the median for work, the time it adds for
    a transfer (the simulator adds the waiting itself)."""
    if o.kind in base:
        return base[o.kind] * o.ratio
    return o.added_s * 1e3


def _step_ms(schedule: Schedule, costs: Costs) -> float:
    report = check(schedule, costs, other_model=False)
    if report.timeline is None:  # a schedule that deadlocks has no step to cost
        return float("nan")
    return float(report.timeline.makespan)


__all__ = ["StepCost", "StepCosts", "medians_ms", "step_costs"]
