"""What a measured pipeline iteration says: waits, the bubble, the critical path, and the
measurement beside its re-costed simulation. The one module of measured analyses: readers read,
views draw what this module computed.

Input is one iteration as a :class:`MeasuredTrace`, whichever reader made it: ``explorer
read`` placing profiler traces (with each action's label, ``wait`` and ``arrived``), the
``instr`` records ``explorer run`` writes, PyTorch's or DeepSpeed's engine. Pure: the results
are plain dicts, ready for ``--json``; :func:`measured_vs_simulated` takes a trace and a
checked schedule and gives the :class:`MeasuredVsSimulated` record the overlay figure draws.

**Waits.** A compute that needs another stage's output (a forward after stage 0, a backward
before the last stage) is *blocked* from its start until its data arrived. Of that, the part
before the producer even posted its send is *waiting* for the partner; the rest is *transfer*
(the data on its way once both sides were there).

**Bubble.** Per rank, the time in the iteration not spent computing (blocked time inside a
compute counts as bubble), over two denominators tools disagree on: the whole iteration (the
share of total time, ``(p-1)/(m+p-1)`` for ideal GPipe/1F1B) and the rank's own compute (the
share of ideal time, ``(p-1)/m``). Both are given, each labelled. :func:`measured_bubble` is
the iteration's one number, in the simulator's terms (``fraction_of_total``): the same compute
seconds summed over ranks. (The overlay's "where the time went" splits the time *outside*
any instruction apart from the waits inside exchanges: :mod:`.breakdown`, for the simulation
and the measurement alike.)

**Critical path.** From the compute that ends last, walk back: when a compute's data arrived
after the rank's previous compute had ended, the data gated it and the path crosses to the
producer on its rank (a send/receive edge); otherwise it stays on the rank. The result is the
chain of actions that set the iteration's length, and each crossing said in words:
"rank 1's 1F3 waited 2.1 ms for rank 0's send of micro-batch 3".

**Plans.** The compute order each rank ran (:func:`planned_order`), as a schedule to simulate
(:func:`planned_schedule`) and where it leaves a given plan (:func:`order_differences`).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import numpy as np

from explorer.pipeline.analysis.breakdown import Breakdown, breakdown, pair_by_key, wait_split
from explorer.pipeline.analysis.check import Report
from explorer.pipeline.analysis.recost import recosted
from explorer.pipeline.analysis.timeline import Timeline
from explorer.pipeline.schedules.adapters import from_torch_pipelining
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.records import MeasuredTrace

_F, _B, _I, _W = (
    int(k) for k in (Kind.FORWARD, Kind.BACKWARD, Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT)
)
COMPUTE = (_F, _B, _I, _W)
_SEND_F, _SEND_B = int(Kind.SEND_ACTIVATION), int(Kind.SEND_GRAD)
_EPS = 1e-7


@dataclass(frozen=True)
class _Rows:
    """A trace's columns as Python lists, read by row index ``i``: the analyses below walk rows
    one by one and sum in their order, so the numbers they give are the records' own floats."""

    rank: list
    stage: list
    kind: list
    microbatch: list
    action: list
    start: list
    end: list
    wait: list
    arrived: list

    @classmethod
    def of(cls, trace: MeasuredTrace) -> "_Rows":
        arrived = [None if np.isnan(a) else a for a in trace.arrived.tolist()]
        cols = ("rank", "stage", "kind", "microbatch", "action", "start", "end", "wait")
        return cls(*(getattr(trace, c).tolist() for c in cols), arrived=arrived)

    def __len__(self) -> int:
        return len(self.rank)


def milliseconds_by_kind(trace: MeasuredTrace) -> dict[str, list[float]]:
    """Each record's duration in milliseconds, by kind code, in the records' order."""
    out: dict[str, list[float]] = {}
    for k, a, b in zip(trace.kind.tolist(), trace.start.tolist(), trace.end.tolist()):
        out.setdefault(Kind(k).code, []).append((b - a) * 1e3)
    return out


def makespan(trace: MeasuredTrace) -> float:
    """Seconds from the first start to the last end (give it one iteration)."""
    return float(trace.end.max() - trace.start.min()) if len(trace) else 0.0


def _producer_key(rows: _Rows, i: int) -> Optional[tuple]:
    """(stage, kind, microbatch) of the compute whose output row ``i`` consumes, or None."""
    if rows.kind[i] == _F:
        return (rows.stage[i] - 1, _F, rows.microbatch[i])
    if rows.kind[i] in (_B, _I):
        return (rows.stage[i] + 1, None, rows.microbatch[i])
    return None


def _index(rows: _Rows) -> tuple[dict, dict]:
    computes = {}
    sends = {}
    for i in range(len(rows)):
        key = (rows.stage[i], rows.kind[i], rows.microbatch[i])
        if rows.kind[i] in COMPUTE:
            computes[key] = i
        elif rows.kind[i] in (_SEND_F, _SEND_B):
            sends[key] = i
    return computes, sends


def _producer(
    rows: _Rows, i: int, computes: dict, sends: dict
) -> tuple[Optional[int], Optional[int]]:
    """The compute that produced row ``i``'s input and the send that carried it (either may be None)."""
    key = _producer_key(rows, i)
    if key is None:
        return None, None
    stage, kind, mb = key
    if kind == _F:
        return computes.get((stage, _F, mb)), sends.get((stage, _SEND_F, mb))
    comp = computes.get((stage, _B, mb))
    if comp is None:
        comp = computes.get((stage, _I, mb))
    return comp, sends.get((stage, _SEND_B, mb))


def waits(trace: MeasuredTrace) -> list[dict]:
    """Per compute that receives its input: blocked, waiting (partner not there yet), transfer (s)."""
    rows = _Rows.of(trace)
    computes, sends = _index(rows)
    out = []
    for i in range(len(rows)):
        if rows.kind[i] not in COMPUTE or _producer_key(rows, i) is None or rows.stage[i] < 0:
            continue
        prod, send = _producer(rows, i, computes, sends)
        if send is not None:
            source, sent = send, rows.start[send]
        elif prod is not None:
            source, sent = prod, rows.end[prod]
        else:
            continue
        blocked = float(rows.wait[i] or 0.0)
        waiting = min(max(sent - rows.start[i], 0.0), blocked)
        out.append(
            {
                "rank": rows.rank[i],
                "stage": rows.stage[i],
                "action": rows.action[i],
                "microbatch": rows.microbatch[i],
                "from_rank": rows.rank[source],
                "from_action": rows.action[source],
                "needed": rows.start[i],
                "sent": sent,
                "arrived": rows.arrived[i],
                "blocked": blocked,
                "waiting": waiting,
                "transfer": blocked - waiting,
            }
        )
    return out


def bubble(trace: MeasuredTrace) -> list[dict]:
    """Per rank: compute seconds, idle seconds, and idle as a share of the iteration and of compute."""
    if not len(trace):
        return []
    rows = _Rows.of(trace)
    lo = min(rows.start)
    span = max(rows.end) - lo
    busy: dict[int, float] = defaultdict(float)
    for i in range(len(rows)):
        busy[rows.rank[i]] += 0.0
        if rows.kind[i] in COMPUTE:
            busy[rows.rank[i]] += max(rows.end[i] - rows.start[i] - float(rows.wait[i] or 0.0), 0.0)
    out = []
    for rank in sorted(busy):
        idle = max(span - busy[rank], 0.0)
        out.append(
            {
                "rank": rank,
                "iteration_s": span,
                "compute_s": busy[rank],
                "idle_s": idle,
                "share_of_iteration": idle / span if span > 0 else 0.0,
                "share_of_compute": idle / busy[rank] if busy[rank] > 0 else None,
            }
        )
    return out


def measured_bubble(trace: MeasuredTrace) -> float:
    """Idle share of one measured iteration, as the simulator's ``fraction_of_total``:
    1 - compute / (ranks x makespan), the compute seconds :func:`bubble` gives each rank."""
    per_rank = bubble(trace)
    span = per_rank[0]["iteration_s"] if per_rank else 0.0
    if span <= 0:
        return 0.0
    return 1.0 - sum(b["compute_s"] for b in per_rank) / (len(per_rank) * span)


def critical_path(trace: MeasuredTrace) -> dict:
    """The chain of computes that set the iteration's length, and each send/receive crossing in words."""
    rows = _Rows.of(trace)
    computes, sends = _index(rows)
    by_rank: dict[int, list[int]] = defaultdict(list)
    for i in range(len(rows)):
        if rows.kind[i] in COMPUTE:
            by_rank[rows.rank[i]].append(i)
    for lst in by_rank.values():
        lst.sort(key=lambda i: rows.start[i])
    position = {i: n for lst in by_rank.values() for n, i in enumerate(lst)}
    if not by_rank:
        return {"steps": [], "sentences": [], "length_s": 0.0, "waited_s": 0.0}
    cur: Optional[int] = max(
        (i for lst in by_rank.values() for i in lst), key=lambda i: rows.end[i]
    )
    steps: list[dict] = []
    seen: set[int] = set()
    while cur is not None and cur not in seen:
        seen.add(cur)
        n = position[cur]
        local = by_rank[rows.rank[cur]][n - 1] if n > 0 else None
        prod, send = _producer(rows, cur, computes, sends)
        blocked = float(rows.wait[cur] or 0.0)
        gated = (
            prod is not None
            and blocked > _EPS
            and (local is None or rows.start[cur] + blocked > rows.end[local] + _EPS)
        )
        step = {
            k: getattr(rows, k)[cur]
            for k in ("rank", "stage", "action", "microbatch", "start", "end")
        }
        step["via"] = "receive" if gated else ("rank" if local is not None else "start")
        step["waited_s"] = blocked if gated else 0.0
        if gated and prod is not None:
            step["from_rank"] = rows.rank[prod]
            step["from_action"] = rows.action[prod if send is None else send]
            step["from_send"] = send is not None
            step["sent"] = rows.start[send] if send is not None else rows.end[prod]
        steps.append(step)
        cur = prod if gated else local
    steps.reverse()
    sentences = [
        f"rank {s['rank']}'s {s['action']} waited {s['waited_s'] * 1e3:.3g} ms for rank "
        f"{s['from_rank']}'s {'send' if s['from_send'] else 'output'} of "
        f"micro-batch {s['microbatch']} ({s['from_action']})"
        for s in steps
        if s["via"] == "receive"
    ]
    start = steps[0]["start"] if steps else 0.0
    return {
        "steps": steps,
        "sentences": sentences,
        "length_s": (steps[-1]["end"] - start) if steps else 0.0,
        "waited_s": sum(s["waited_s"] for s in steps),
        "ranks": [s["rank"] for s in steps],
    }


def summary(path: dict) -> str:
    """One line: how long the path is, which ranks it crosses, how much of it is waiting."""
    if not path["steps"]:
        return "critical path: no compute placed"
    hops = [path["steps"][0]["rank"]]
    for s in path["steps"][1:]:
        if s["rank"] != hops[-1]:
            hops.append(s["rank"])
    return (
        f"critical path: {len(path['steps'])} computes, {path['length_s'] * 1e3:.3g} ms, ranks "
        f"{' -> '.join(map(str, hops))}; {path['waited_s'] * 1e3:.3g} ms of it waiting for data"
    )


def planned_order(trace: MeasuredTrace) -> dict[int, list[str]]:
    """Each rank's compute actions in the order they ran: the plan the actions show."""
    rows = _Rows.of(trace)
    out: dict[int, list[str]] = {}
    for i in sorted(range(len(rows)), key=lambda i: rows.start[i]):
        if rows.kind[i] in COMPUTE:
            out.setdefault(rows.rank[i], []).append(rows.action[i])
    return out


def order_differences(measured: dict[int, list[str]], planned: dict[int, list[str]]) -> list[str]:
    """Per rank, where the measured compute order leaves the plan, said in one line each."""
    out = []
    for rank in sorted(set(measured) | set(planned)):
        got, want = measured.get(rank, []), planned.get(rank, [])
        if got == want:
            continue
        i = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        ran = got[i] if i < len(got) else "nothing more"
        plan = want[i] if i < len(want) else "nothing more"
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        line = f"rank {rank}: action {i} ran {ran} where the plan has {plan}"
        if missing:
            line += f"; never ran {', '.join(missing[:8])}"
        if extra:
            line += f"; ran unplanned {', '.join(extra[:8])}"
        out.append(line)
    return out


def planned_schedule(trace: MeasuredTrace) -> Schedule:
    """The compute order the measured actions show, as a schedule (exchanges added as PyTorch adds them)."""
    return from_torch_pipelining(planned_order(trace), name="measured order")


@dataclass(frozen=True, eq=False)
class Lane:
    """One lane of bars on every rank's row: the simulated or the measured iteration, on the
    figure's time axis; ``wait`` is the part of each instruction spent waiting for its partner."""

    label: str  # "simulated" or "measured"
    rank: np.ndarray
    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    wait: np.ndarray
    microbatch: np.ndarray


@dataclass(frozen=True, eq=False)
class KindMeans:
    """Mean duration per instruction kind on the axis' unit, simulated beside measured (0 where
    the measurement has none of a kind)."""

    kinds: tuple[Kind, ...]
    simulated: tuple[float, ...]
    measured: Optional[tuple[float, ...]]


@dataclass(frozen=True, eq=False)
class MeasuredVsSimulated:
    """A checked schedule and (when given) a measurement of it, analysed for the overlay figure.

    ``problem`` says why there is nothing to draw (the simulation deadlocks); otherwise
    ``timeline`` is the simulation drawn (re-costed from the measurement, in milliseconds, or
    the schedule's own in ticks), ``lanes`` the simulated lane and the measured one, ``parts``
    where each lane's time went (:mod:`.breakdown`) with ``words`` saying the largest cost that
    is not compute, and ``kind_means`` the mean duration per kind.
    """

    report: Report
    trace: Optional[MeasuredTrace] = None
    problem: str = ""
    timeline: Optional[Timeline] = None
    lanes: tuple[Lane, ...] = ()
    parts: tuple[Breakdown, ...] = ()
    words: str = ""
    kind_means: Optional[KindMeans] = None

    @property
    def unit(self) -> str:
        return "s" if self.trace is not None else "ticks"

    @property
    def to_axis(self) -> float:
        """Re-costed simulations are in milliseconds, a measured axis in seconds."""
        return 1e-3 if self.trace is not None else 1.0


def measured_vs_simulated(
    report: Report, trace: Optional[MeasuredTrace] = None
) -> MeasuredVsSimulated:
    """``report``'s simulation re-costed from ``trace`` (per rank and per kind), both as lanes on
    one time axis, where each lane's time went and the mean per kind; without a trace (or with
    an empty one) the simulation alone, in ticks."""
    if report.timeline is None:
        return MeasuredVsSimulated(report, problem="no simulation: the schedule deadlocks")
    measured = trace if trace is not None and len(trace) > 0 else None
    sim = recosted(report, measured) if measured is not None else report
    tl = sim.timeline
    if (
        tl is None
    ):  # a measurement cannot make a valid schedule deadlock; keep the figure honest anyway
        return MeasuredVsSimulated(report, problem="the re-costed simulation deadlocks")
    s = report.schedule
    to_axis = 1e-3 if measured is not None else 1.0
    sim_start, sim_end = tl.start * to_axis, tl.end * to_axis
    sim_wait = wait_split(s.kind, tl.start, tl.end, sim.matching.partner) * to_axis
    lanes = [Lane("simulated", s.rank, s.kind, sim_start, sim_end, sim_wait, s.microbatch)]
    parts = [breakdown(s.rank, s.kind, sim_start, sim_end, sim.matching.partner)]
    if measured is not None:
        offset = float(measured.start.min())
        m_start, m_end = measured.start - offset, measured.end - offset
        partner = pair_by_key(measured.stage, measured.kind, measured.microbatch)
        m_wait = wait_split(measured.kind, m_start, m_end, partner)
        lanes.append(
            Lane(
                "measured",
                measured.rank,
                measured.kind,
                m_start,
                m_end,
                m_wait,
                measured.microbatch,
            )
        )
        parts.append(
            breakdown(
                measured.rank, measured.kind, m_start, m_end, partner, stopped=measured.stopped
            )
        )
    unit = "s" if measured is not None else "ticks"
    return MeasuredVsSimulated(
        report,
        trace=measured,
        timeline=tl,
        lanes=tuple(lanes),
        parts=tuple(parts),
        words=parts[-1].sentence(unit),
        kind_means=_kind_means(report, tl, to_axis, measured),
    )


def _kind_means(
    report: Report, tl: Timeline, to_axis: float, trace: Optional[MeasuredTrace]
) -> KindMeans:
    """Mean duration per kind the schedule runs (and the simulation gives time), simulated and measured."""
    s = report.schedule
    sim_dur = (tl.end - tl.start) * to_axis
    kinds = [k for k in Kind if (s.kind == k).any() and sim_dur[s.kind == k].max() > 0]
    sim = tuple(float(sim_dur[s.kind == k].mean()) for k in kinds)
    if trace is None:
        return KindMeans(tuple(kinds), sim, None)
    meas = tuple(
        float((trace.end - trace.start)[trace.kind == k].mean()) if (trace.kind == k).any() else 0.0
        for k in kinds
    )
    return KindMeans(tuple(kinds), sim, meas)


__all__ = [
    "KindMeans",
    "makespan",
    "milliseconds_by_kind",
    "Lane",
    "MeasuredVsSimulated",
    "bubble",
    "critical_path",
    "measured_bubble",
    "measured_vs_simulated",
    "order_differences",
    "planned_order",
    "planned_schedule",
    "summary",
    "waits",
]
