"""A run's instruction records as a ``MeasuredTrace``, a Chrome/Perfetto trace and a table.

Records are the ``instr`` lines of the rank files (rank, stage, step, instruction, micro-batch,
buffer, start, end in seconds on the aligned clock, iteration). The Chrome trace names each
event ``PP:<instruction>`` in the explorer's compact form (``PP:2SG0b0``), the same key
PyTorch's pipelining uses, so :func:`explorer.pipeline.traces.read_chrome_trace` reads it back and the
two engines line up in Perfetto (process = rank, thread = stage).

Readers only read: :func:`to_measured` makes the one record every measured analysis takes;
turning it into simulator costs is analysis (:func:`explorer.pipeline.analysis.recost.measured_costs`),
and so are its makespan and bubble (:mod:`explorer.pipeline.analysis.measured`). The records
themselves stay the rank files' lines only to be written back out (the table, the CSV, the
Chrome trace, ``--json``).
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


__all__ = [
    "record_kind",
    "to_measured",
    "chrome_trace",
    "table",
    "to_csv",
]
