"""Re-cost a simulation from a measurement, so the two share one time axis in seconds.

Simulated ticks and measured seconds do not compare: a default forward of 1 tick drawn beside
a measured 4 ms forward puts the simulation in the first few milliseconds of the plot. The
simulator is instead given the costs the run measured, per rank and per kind (a slow rank is
simulated slow), in milliseconds: medians of compute kinds; for exchanges the time inside the
call once the partner was ready (waiting is what the simulator adds itself). What is left
between simulation and measurement is then the schedule's doing, or noise.
"""

from __future__ import annotations

import numpy as np

from explorer.analysis.breakdown import pair_by_key, wait_split
from explorer.analysis.check import Report, check
from explorer.analysis.timeline import Costs
from explorer.schedules.instructions import Kind
from explorer.traces.records import MeasuredTrace

_FIELDS = {
    Kind.FORWARD: "forward",
    Kind.BACKWARD: "backward",
    Kind.BACKWARD_INPUT: "backward_input",
    Kind.BACKWARD_WEIGHT: "backward_weight",
    Kind.LOAD: "load",
    Kind.REDUCE_GRADS: "reduce",
    Kind.OPTIMIZER_STEP: "optimizer",
    Kind.SEND_ACTIVATION: "send",
    Kind.SEND_GRAD: "send",
    Kind.RECV_ACTIVATION: "recv",
    Kind.RECV_GRAD: "recv",
}
_PER_RANK = ("forward", "backward", "backward_input", "backward_weight", "send", "recv")


def trace_costs(trace: MeasuredTrace) -> Costs:
    """Milliseconds per kind (medians of compute, means of in-call exchange time), per rank where they differ."""
    scale = 1e3 if trace.unit == "s" else 1.0
    partner = pair_by_key(trace.stage, trace.kind, trace.microbatch)
    busy = (
        trace.end - trace.start - wait_split(trace.kind, trace.start, trace.end, partner)
    ) * scale

    def costs_of(rows: np.ndarray) -> dict:  # noqa: E306 - one helper, local on purpose
        values: dict = {}
        for kind, name in _FIELDS.items():
            mine = busy[rows & (trace.kind == kind)]
            if len(mine):
                values.setdefault(name, []).extend(mine.tolist())
        return {
            name: float(np.mean(v) if name in ("send", "recv") else np.median(v))
            for name, v in values.items()
        }

    everything = np.ones(len(trace), dtype=bool)
    costs = Costs(**costs_of(everything))
    for rank in np.unique(trace.rank).tolist():
        own = {k: v for k, v in costs_of(trace.rank == rank).items() if k in _PER_RANK}
        if own:
            costs = costs.with_rank(int(rank), **own)
    return costs


def recosted(report: Report, trace: MeasuredTrace) -> Report:
    """``report``'s schedule simulated with the costs ``trace`` measured (times in milliseconds)."""
    return check(report.schedule, trace_costs(trace))


__all__ = ["trace_costs", "recosted"]
