"""Re-cost a simulation from a measurement, so the two share one time axis in seconds.

Simulated ticks and measured seconds do not compare: a default forward of 1 tick drawn beside
a measured 4 ms forward puts the simulation in the first few milliseconds of the plot. The
simulator is instead given the costs the run measured, per rank and per kind (a slow rank is
simulated slow), in milliseconds: medians of compute kinds; for exchanges the time inside the
call once the partner was ready (waiting is what the simulator adds itself). What is left
between simulation and measurement is then the schedule's doing, or noise.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.breakdown import pair_by_key, wait_split
from explorer.pipeline.analysis.check import Report, check
from explorer.pipeline.analysis.p2p_models import P2PModel
from explorer.pipeline.analysis.timeline import Costs
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.records import MeasuredTrace

#: The compute kinds a measurement's median gives the simulator a cost for (the ``Costs`` field).
_MEDIAN_FIELDS = {
    Kind.FORWARD: "forward",
    Kind.BACKWARD: "backward",
    Kind.BACKWARD_INPUT: "backward_input",
    Kind.BACKWARD_WEIGHT: "backward_weight",
    Kind.LOAD: "load",
    Kind.REDUCE_GRADS: "reduce",
    Kind.OPTIMIZER_STEP: "optimizer",
}
#: Every kind a trace gives a cost for: the compute kinds, and the exchanges' time in the call.
_FIELDS = {
    **_MEDIAN_FIELDS,
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


def p2p_pairs(trace: MeasuredTrace) -> list[tuple[int, int]]:
    """Each receive with its matching send (same iteration, stages, direction, micro-batch), as
    row indices ``(send, receive)`` of ``trace``."""
    stage, mb, it = trace.stage.tolist(), trace.microbatch.tolist(), trace.iteration.tolist()
    kinds = [Kind(k) for k in trace.kind.tolist()]
    sends: dict[tuple, int] = {}
    for i, kind in enumerate(kinds):
        if kind in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD):
            peer = stage[i] + (1 if kind == Kind.SEND_ACTIVATION else -1)
            sends[(it[i], peer, kind == Kind.SEND_GRAD, mb[i])] = i
    out = []
    for i, kind in enumerate(kinds):
        if kind in (Kind.RECV_ACTIVATION, Kind.RECV_GRAD):
            send = sends.get((it[i], stage[i], kind == Kind.RECV_GRAD, mb[i]))
            if send is not None:
                out.append((send, i))
    return out


def p2p_latencies(trace: MeasuredTrace) -> list[float]:
    """Milliseconds from "both ends ready" to "received", per matched send/receive."""
    start, end = trace.start.tolist(), trace.end.tolist()
    return [max(end[r] - max(start[r], start[s]), 0.0) * 1e3 for s, r in p2p_pairs(trace)]


def measured_costs(trace: MeasuredTrace, model: P2PModel = "batched") -> Costs:
    """Simulator costs in milliseconds, from one measurement, for the P2P ``model`` it will simulate.

    Compute kinds: the median duration per kind. Exchanges: the *mean*, because their times are
    bimodal on a loaded CPU (most calls take tens of microseconds, the ones that lose their core
    to gloo's I/O thread or another process take a scheduler slice of 4-6 ms) and a makespan is a
    sum: the median sees only the first mode. A measured send or receive also holds time spent
    waiting for the partner, which the simulator adds itself, so the costs come from matched
    pairs (:func:`p2p_pairs`) in the terms of each model:

    - ``blocking`` (DeepSpeed's ``dist.send``/``dist.recv``): from "both ends ready" (the later
      start) to each side's end is the time that side spends in its call: ``send``/``recv``,
      with ``p2p`` 0 (the shared part cannot be told apart from the calls' own).
    - ``batched`` (``isend``; receives wait for the data): ``send`` is the time inside the send
      call; ``recv`` the receive among pairs whose data was sent before the receive began
      (nothing to wait for); ``p2p`` what is left, in the other pairs, between the send's end
      and the receive's end.

    Without these the simulator predicted a third of the real makespan on this kind of machine.
    Send and receive costs are also kept per rank (``Costs.with_rank``): measured sends can be
    slow on one rank (the one whose ``isend`` wakes a waiting peer) and fast on the other.
    """
    if model not in ("batched", "blocking"):
        raise InputError(
            f"model {model!r}: use the schedule's P2P model, batched or blocking (schedule.params['p2p'])"
        )
    rank, start, end = trace.rank.tolist(), trace.start.tolist(), trace.end.tolist()
    kinds = [Kind(k) for k in trace.kind.tolist()]
    by_kind: dict[Kind, list[float]] = {}
    for kind, a, b in zip(kinds, start, end):
        by_kind.setdefault(kind, []).append((b - a) * 1e3)
    values = {
        field: float(np.median(by_kind[k])) for k, field in _MEDIAN_FIELDS.items() if k in by_kind
    }
    pairs = p2p_pairs(trace)
    if model == "blocking":
        both = [max(start[snd], start[rcv]) for snd, rcv in pairs]
        # Clocks of two processes agree only to a few microseconds: never a negative call.
        send_times = [(rank[snd], max(end[snd] - t, 0.0)) for (snd, _), t in zip(pairs, both)]
        recv_times = [(rank[rcv], max(end[rcv] - t, 0.0)) for (_, rcv), t in zip(pairs, both)]
    else:
        send_times = [
            (rank[i], end[i] - start[i])
            for i, kind in enumerate(kinds)
            if kind in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD)
        ]
        recv_times = [
            (rank[rcv], end[rcv] - start[rcv]) for snd, rcv in pairs if start[rcv] >= end[snd]
        ]
    values["send"] = _mean_ms([t for _, t in send_times])
    values["recv"] = _mean_ms([t for _, t in recv_times])
    if model == "batched":
        waited = [end[rcv] - end[snd] for snd, rcv in pairs if start[rcv] < end[snd]]
        values["p2p"] = max(_mean_ms(waited) - values["recv"], 0.0) if waited else 0.0
    costs = Costs.of(values)
    # One rank's calls can be far slower than another's (the one whose send wakes a waiting
    # peer loses its core), and the pipeline runs at the slow rank's pace: keep them per rank.
    for rank in sorted({r for r, _ in send_times} | {r for r, _ in recv_times}):
        own = {}
        for name, samples in (("send", send_times), ("recv", recv_times)):
            mine = [t for r, t in samples if r == rank]
            if mine:
                own[name] = _mean_ms(mine)
        costs = costs.with_rank(rank, **own)
    return costs


def _mean_ms(seconds: Sequence[float]) -> float:
    return float(np.mean(seconds)) * 1e3 if len(seconds) else 0.0


__all__ = ["measured_costs", "p2p_latencies", "p2p_pairs", "recosted", "trace_costs"]
