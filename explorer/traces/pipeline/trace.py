"""A run's instruction records as a ``MeasuredTrace``, a Chrome/Perfetto trace, a table, and costs.

Records are the ``instr`` lines of the rank files (rank, stage, step, instruction, micro-batch,
buffer, start, end in seconds on the aligned clock, iteration). The Chrome trace names each
event ``PP:<instruction>`` in the explorer's compact form (``PP:2SG0b0``), the same key
PyTorch's pipelining uses, so :func:`explorer.traces.read_chrome_trace` reads it back and the
two engines line up in Perfetto (process = rank, thread = stage).

:func:`measured_costs` turns a measurement into simulator :class:`~explorer.analysis.Costs`
(milliseconds), so the simulated timeline of the same schedule can be compared with reality.
"""

from __future__ import annotations

import csv
import io
from typing import Iterable, Optional, Sequence

import numpy as np

from explorer.analysis import Costs
from explorer.analysis.p2p_models import P2PModel
from explorer.errors import InputError
from explorer.schedules.instructions import Kind, parse_instruction
from explorer.traces.failure import Failure
from explorer.traces.records import MeasuredTrace

_COLUMNS = (
    "iteration",
    "rank",
    "stage",
    "step",
    "instruction",
    "microbatch",
    "buffer",
    "start",
    "end",
)
_COST_FIELDS = {
    Kind.FORWARD: "forward",
    Kind.BACKWARD: "backward",
    Kind.BACKWARD_INPUT: "backward_input",
    Kind.BACKWARD_WEIGHT: "backward_weight",
    Kind.LOAD: "load",
    Kind.REDUCE_GRADS: "reduce",
    Kind.OPTIMIZER_STEP: "optimizer",
}


def record_kind(record: dict) -> Kind:
    return parse_instruction(record["text"]).kind


def to_measured(records: Iterable[dict], source: str = "") -> MeasuredTrace:
    """The records as the overlay's generic :class:`MeasuredTrace` (seconds)."""
    return MeasuredTrace.from_records(
        [
            {
                "rank": r["rank"],
                "stage": r["stage"],
                "step": r["step"],
                "kind": record_kind(r),
                "microbatch": r["microbatch"],
                "start": r["start"],
                "end": r["end"],
            }
            for r in records
        ],
        unit="s",
        source=source,
    )


def last_iteration(records: Sequence[dict]) -> list[dict]:
    """The records of the last timed iteration (the first pays for warm-up)."""
    if not records:
        return []
    it = max(r["iteration"] for r in records)
    return [r for r in records if r["iteration"] == it]


def chrome_trace(
    records: Sequence[dict], failure: Optional[Failure] = None, name: str = "explorer pipeline"
) -> dict:
    """A Chrome trace-event JSON object (``chrome://tracing``, ui.perfetto.dev)."""
    events: list[dict] = []
    for rank in sorted({r["rank"] for r in records} | ({failure.rank} if failure else set())):
        events.append(
            {
                "ph": "M",
                "name": "process_name",
                "pid": rank,
                "tid": 0,
                "args": {"name": f"rank {rank}"},
            }
        )
    for rank, stage in sorted({(r["rank"], r["stage"]) for r in records}):
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": rank,
                "tid": stage,
                "args": {"name": f"stage {stage}"},
            }
        )
    for r in records:
        events.append(
            {
                "name": f"PP:{r['text']}",
                "cat": "pipeline",
                "ph": "X",
                "pid": r["rank"],
                "tid": r["stage"],
                "ts": r["start"] * 1e6,
                "dur": max(r["end"] - r["start"], 0.0) * 1e6,
                "args": {
                    "iteration": r["iteration"],
                    "step": r["step"],
                    "instruction": r["instruction"],
                    "microbatch": r["microbatch"],
                    "buffer": r["buffer"],
                },
            }
        )
    if failure:
        end = max((r["end"] for r in records if r["rank"] == failure.rank), default=0.0)
        events.append(
            {
                "name": f"failure: {failure.message}",
                "cat": "failure",
                "ph": "i",
                "s": "p",
                "pid": failure.rank,
                "tid": failure.stage or 0,
                "ts": end * 1e6,
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": {"source": name}}


def table(records: Sequence[dict]) -> str:
    """A fixed-width text table, one row per instruction, times in milliseconds."""
    head = f"{'it':>3} {'rank':>4} {'stage':>5} {'step':>4}  {'instruction':<26} {'mb':>3} {'buf':>3} {'start ms':>10} {'end ms':>10} {'dur ms':>8}"
    rows = [head] + [
        f"{r['iteration']:>3} {r['rank']:>4} {r['stage']:>5} {r['step']:>4}  {r['instruction']:<26} {r['microbatch']:>3} "
        f"{r['buffer']:>3} {r['start'] * 1e3:>10.3f} {r['end'] * 1e3:>10.3f} {(r['end'] - r['start']) * 1e3:>8.3f}"
        for r in sorted(records, key=lambda r: (r["iteration"], r["start"], r["rank"]))
    ]
    return "\n".join(rows)


def to_csv(records: Sequence[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    return buf.getvalue()


def makespan(records: Sequence[dict]) -> float:
    """Seconds from the first start to the last end (use one iteration's records)."""
    return max(r["end"] for r in records) - min(r["start"] for r in records) if records else 0.0


def measured_costs(records: Sequence[dict], model: P2PModel = "batched") -> Costs:
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
    by_kind: dict[Kind, list[float]] = {}
    for r in records:
        by_kind.setdefault(record_kind(r), []).append((r["end"] - r["start"]) * 1e3)
    values = {
        field: float(np.median(by_kind[k])) for k, field in _COST_FIELDS.items() if k in by_kind
    }
    pairs = p2p_pairs(records)
    if model == "blocking":
        both = [max(snd["start"], rcv["start"]) for snd, rcv in pairs]
        # Clocks of two processes agree only to a few microseconds: never a negative call.
        send_times = [(snd["rank"], max(snd["end"] - t, 0.0)) for (snd, _), t in zip(pairs, both)]
        recv_times = [(rcv["rank"], max(rcv["end"] - t, 0.0)) for (_, rcv), t in zip(pairs, both)]
    else:
        send_times = [
            (r["rank"], r["end"] - r["start"])
            for r in records
            if record_kind(r) in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD)
        ]
        recv_times = [
            (rcv["rank"], rcv["end"] - rcv["start"])
            for snd, rcv in pairs
            if rcv["start"] >= snd["end"]
        ]
    values["send"] = _mean_ms([t for _, t in send_times])
    values["recv"] = _mean_ms([t for _, t in recv_times])
    if model == "batched":
        waited = [rcv["end"] - snd["end"] for snd, rcv in pairs if rcv["start"] < snd["end"]]
        values["p2p"] = max(_mean_ms(waited) - values["recv"], 0.0) if waited else 0.0
    costs = Costs(**values)
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


def p2p_pairs(records: Sequence[dict]) -> list[tuple[dict, dict]]:
    """Each receive with its matching send (same iteration, stages, direction, micro-batch)."""
    sends: dict[tuple, dict] = {}
    for r in records:
        kind = record_kind(r)
        if kind in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD):
            peer = r["stage"] + (1 if kind == Kind.SEND_ACTIVATION else -1)
            sends[(r["iteration"], peer, kind == Kind.SEND_GRAD, r["microbatch"])] = r
    out = []
    for r in records:
        kind = record_kind(r)
        if kind in (Kind.RECV_ACTIVATION, Kind.RECV_GRAD):
            send = sends.get((r["iteration"], r["stage"], kind == Kind.RECV_GRAD, r["microbatch"]))
            if send is not None:
                out.append((send, r))
    return out


def p2p_latencies(records: Sequence[dict]) -> list[float]:
    """Milliseconds from "both ends ready" to "received", per matched send/receive."""
    return [
        max(rcv["end"] - max(rcv["start"], snd["start"]), 0.0) * 1e3
        for snd, rcv in p2p_pairs(records)
    ]


def measured_bubble(records: Sequence[dict]) -> float:
    """Idle share of one measured iteration, as the simulator's ``fraction_of_total``: 1 - compute / (ranks x makespan)."""
    span = makespan(records)
    ranks = {r["rank"] for r in records}
    busy = sum(r["end"] - r["start"] for r in records if record_kind(r).is_compute)
    return 1.0 - busy / (len(ranks) * span) if span > 0 else 0.0


__all__ = [
    "record_kind",
    "to_measured",
    "last_iteration",
    "chrome_trace",
    "table",
    "to_csv",
    "makespan",
    "measured_costs",
    "p2p_pairs",
    "p2p_latencies",
    "measured_bubble",
]
