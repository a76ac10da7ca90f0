"""A run's instruction records as a ``MeasuredTrace``, a Chrome/Perfetto trace and a table.

Records are the ``instr`` lines of the rank files (rank, stage, step, instruction, micro-batch,
buffer, start, end in seconds on the aligned clock, iteration). The Chrome trace names each
event ``PP:<instruction>`` in the explorer's compact form (``PP:2SG0b0``), the same key
PyTorch's pipelining uses, so :func:`explorer.pipeline.traces.read_chrome_trace` reads it back and the
two engines line up in Perfetto (process = rank, thread = stage).

Readers only read: turning a measurement into simulator costs is analysis
(:func:`explorer.pipeline.analysis.recost.measured_costs`), and so is its bubble
(:func:`explorer.pipeline.analysis.measured.measured_bubble`).
"""

from __future__ import annotations

import csv
import io
from typing import Iterable, Optional, Sequence

from explorer.failure import Failure
from explorer.pipeline.schedules.instructions import Kind, parse_instruction
from explorer.pipeline.traces.records import MeasuredTrace

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


def record_kind(record: dict) -> Kind:
    return parse_instruction(record["text"]).kind


def to_measured(records: Iterable[dict], source: str = "") -> MeasuredTrace:
    """The records as the overlay's generic :class:`MeasuredTrace` (seconds)."""
    return MeasuredTrace.from_records(
        [
            {
                "rank": r["rank"],
                "stage": r["stage"],
                "step": r.get("step", -1),
                "kind": record_kind(r),
                "microbatch": r["microbatch"],
                "start": r["start"],
                "end": r["end"],
                "iteration": r.get("iteration", -1),
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
    failed = {failure.rank} if failure and failure.rank is not None else set()  # None: no one rank
    for rank in sorted({r["rank"] for r in records} | failed):
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


__all__ = [
    "record_kind",
    "to_measured",
    "last_iteration",
    "chrome_trace",
    "table",
    "to_csv",
    "makespan",
    "p2p_pairs",
    "p2p_latencies",
]
