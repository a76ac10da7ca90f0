"""One rank's profiler trace as the instruction columns of a job of thousands of ranks.

A job folder of profiler traces (``torch_rank<R>.json``, see :mod:`..job_folder`) is read one
trace at a time, placed exactly as ``explorer read`` places a small job's traces (the ``PP:``
labels of ``_PipelineScheduleRuntime``, or ``Forward i``/``Backward i`` of a single-stage
schedule: :mod:`.labelled`), and reduced to the columns the fold, the clocks and the step costs
read. One definition of where an action starts and ends, whatever the job's size.

A receive's end is when its data arrived (the end of the asynchronous receive it posted), as the
explorer's engine times a receive until its data is there: a message's receive then ends after
its send began, which is what the clocks read. A compute's span holds its wait for that data;
its work starts when the data is there, so a slow link is not read as a slow forward. Times are seconds on the trace's own clock
(``baseTimeNanoseconds`` + ``ts``): a rank's offset is its host's, as in the engine's files.

A trace with no label to place actions by is not guessed at here (the inferred placement needs
every rank's trace at once): it is named as unread, with what to add.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Optional

import numpy as np

from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.profiler.events import read_rank_trace
from explorer.pipeline.traces.profiler.labelled import (
    has_pp_labels,
    has_single_labels,
    place_pp,
    place_single,
)
from explorer.pipeline.traces.rank_read import RankRead, Unread

_KIND_OF_CODE = {k.code: int(k) for k in Kind}
_RECEIVES = (Kind.RECV_ACTIVATION.code, Kind.RECV_GRAD.code)


def _why(exc: InputError, path: Path) -> str:
    """The reader's sentence without the file's name (the report names the rank)."""
    text = str(exc)
    for prefix in (f"profiler trace {excerpt(str(path))}", f"profiler trace {path}"):
        if text.startswith(prefix):
            text = text[len(prefix) :].lstrip(" :")
    if text.startswith("is not JSON"):
        empty = path.exists() and path.stat().st_size == 0
        return "its file is empty" if empty else f"its trace {text} (cut short?)"
    return f"its trace {text}" if text else "its trace is not a profiler trace"


def _times(record: dict) -> tuple[float, float]:
    """A receive until its data arrived; a compute from when its data was there (its span also
    holds the wait): the times the explorer's engine gives the same instructions."""
    arrived = record.get("arrived")
    if arrived is None:
        return record["start"], record["end"]
    if record["kind"] in _RECEIVES:
        return record["start"], max(arrived, record["start"])
    return record["start"] + record.get("wait", 0.0), record["end"]


def _columns(records: list[dict], rank: int) -> dict[str, np.ndarray]:
    starts, ends = zip(*map(_times, records))
    return {
        "rank": np.full(len(records), rank, dtype=np.int32),
        "stage": np.array([r["stage"] for r in records], dtype=np.int16),
        "iteration": np.array([r["iteration"] for r in records], dtype=np.int32),
        "kind": np.array([_KIND_OF_CODE.get(r["kind"], -1) for r in records], dtype=np.int8),
        "microbatch": np.array([r["microbatch"] for r in records], dtype=np.int32),
        "start": np.array(starts, dtype=np.float64),
        "end": np.array(ends, dtype=np.float64),
    }


_WORLD = re.compile(rb'"world_size"\s*:\s*(\d+)')


def world_of(path: Path, head: int = 65536) -> Optional[int]:
    """The world size the trace's ``distributedInfo`` names, from its first bytes (None: none)."""
    try:
        with open(path, "rb") as fh:
            m = _WORLD.search(fh.read(head))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def read_trace_rank(path: Path, rank: int, world: Optional[int] = None) -> RankRead:
    """One rank's trace: its instruction columns, what was wrong with it, and no ``unix`` start
    (the trace's times are already on its host's clock)."""
    try:
        trace = read_rank_trace(path)
    except InputError as exc:
        return None, Unread(rank, _why(exc, path)), math.nan
    if trace.rank != rank:
        return None, Unread(rank, f"its trace says rank {trace.rank} (distributedInfo)"), math.nan
    if world is not None and trace.world_size not in (None, world):
        return (
            None,
            Unread(
                rank, f"its trace is of a job of {trace.world_size} ranks, not this one's {world}"
            ),
            math.nan,
        )
    unplaced: list[str] = []
    notes: list[str] = []
    if has_pp_labels(trace):
        records = place_pp(trace, unplaced, notes)
    elif has_single_labels(trace):
        records = place_single(trace, notes)
    else:
        why = (
            "its trace labels no pipeline action (PP:<action> or Forward i / Backward i): run the "
            "schedule with PyTorch's pipelining runtime, which labels each action"
        )
        return None, Unread(rank, why), math.nan
    if not records:
        return None, Unread(rank, "its trace holds no placed action"), math.nan
    problem = Unread(rank, unplaced[0], len(records)) if unplaced else None
    return _columns(records, rank), problem, math.nan


__all__ = ["read_trace_rank", "world_of"]
