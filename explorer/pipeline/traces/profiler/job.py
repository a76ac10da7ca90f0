"""A whole job: every rank's profiler trace, each action placed, on one clock, with what was not placed.

Each rank is read the way its trace allows (:mod:`.labelled` for ``PP:`` and ``Forward i``
labels, :mod:`.inferred` for traces that label nothing), so a job whose ranks ran different
schedule classes is still read; the method per rank is part of the result. Times are seconds
from the job's first placed action. ``iterations`` counts the iterations found; the analyses
look at the last one (the first pays for warm-up and shape inference).
"""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from explorer.errors import InputError, excerpt
from explorer.pipeline.traces.profiler.events import RECV_OPS, SEND_OPS, RankTrace, read_rank_trace
from explorer.pipeline.traces.profiler.inferred import Orders, place_inferred
from explorer.pipeline.traces.profiler.labelled import (
    has_pp_labels,
    has_single_labels,
    place_pp,
    place_single,
)
from explorer.pipeline.traces.records import MeasuredTrace

#: Files looked at in a folder (a job of more ranks is a folder of that many traces).
MAX_FILES = 4096


@dataclass
class ProfiledJob:
    """Placed records of every rank (see the module docstring)."""

    path: str
    ranks: list[int]
    methods: dict[int, str]
    records: list[dict]
    unplaced: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    world_size: Optional[int] = None

    @property
    def iterations(self) -> int:
        return 1 + max((r["iteration"] for r in self.records), default=-1)

    def iteration(self, which: Optional[int] = None) -> MeasuredTrace:
        """One iteration (the last by default) as the :class:`MeasuredTrace` every measured
        analysis takes, times from its first start, in order of start."""
        return MeasuredTrace.from_records(self._rows(which), unit="s", source="profiler traces")

    def _rows(self, which: Optional[int]) -> list[dict]:
        if not self.records:
            return []
        it = self.iterations - 1 if which is None else which
        rows = [dict(r) for r in self.records if r["iteration"] == it]
        t0 = min((r["start"] for r in rows), default=0.0)
        for r in rows:
            r["start"] -= t0
            r["end"] -= t0
            if r["arrived"] is not None:
                r["arrived"] -= t0
        return sorted(rows, key=lambda r: (r["start"], r["rank"]))


def profile_paths(path: Path) -> list[Path]:
    """Chrome-trace files of a job: the file itself, or the folder's ``*.json``/``*.json.gz``."""
    if path.is_file():
        return [path]
    found = sorted(
        p for p in path.iterdir() if p.is_file() and p.name.endswith((".json", ".json.gz"))
    )
    return found[:MAX_FILES]


def _head(path: Path, size: int = 65536) -> bytes:
    """The file's first ``size`` bytes (decompressed when gzipped); empty when unreadable."""
    try:
        with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as fh:
            return fh.read(size)
    except (OSError, EOFError, zlib.error):
        return b""


def has_rank_info(path: Path, head: int = 65536) -> bool:
    """Cheap look: does the file's first part say it is a profiler trace of a process-group rank?"""
    text = _head(path, head)
    return b'"distributedInfo"' in text and b'"traceEvents"' in text


def read_job(path: Path, orders: Optional[Orders] = None) -> ProfiledJob:
    """Read every rank's trace at ``path`` and place what can be placed (InputError: nothing to read)."""
    files = [p for p in profile_paths(path) if has_rank_info(p)]
    if not files:
        raise InputError(
            f"{excerpt(str(path))} holds no profiler trace with distributedInfo: export one per "
            "rank with prof.export_chrome_trace after init_process_group"
        )
    traces: dict[int, RankTrace] = {}
    for f in files:
        t = read_rank_trace(f)
        if t.rank in traces:
            raise InputError(
                f"{excerpt(str(f))} and {excerpt(traces[t.rank].path)} are both rank {t.rank}: "
                "keep one trace per rank (one job, one iteration window) in the folder"
            )
        traces[t.rank] = t
    if not any(_pipelined(t) for t in traces.values()):
        raise InputError(
            f"{excerpt(str(path))}: the profiler traces hold no pipeline action label (PP:..., "
            "Forward i) and no point-to-point send or receive: not a torch.distributed.pipelining "
            "job's traces"
        )
    unplaced: list[str] = []
    notes: list[str] = []
    methods: dict[int, str] = {}
    records: list[dict] = []
    plain: list[RankTrace] = []
    for rank, t in sorted(traces.items()):
        if has_pp_labels(t):
            methods[rank] = "PP:<action> labels (_PipelineScheduleRuntime)"
            records += place_pp(t, unplaced, notes)
        elif has_single_labels(t):
            methods[rank] = "Forward i / Backward i labels (single-stage schedule)"
            records += place_single(t, notes)
        else:
            methods[rank] = "operators, autograd sequence numbers and sends (no labels)"
            plain.append(t)
    if plain:
        records += place_inferred(plain, orders, unplaced, notes)
    world = max((t.world_size or 0 for t in traces.values()), default=0) or None
    if world and len(traces) < world:
        missing = sorted(set(range(world)) - set(traces))
        unplaced.append(
            f"ranks {missing} of {world} have no trace here: their actions cannot be placed "
            "and edges to them are not followed"
        )
    if records:
        t0 = min(r["start"] for r in records)
        for r in records:
            r["start"] -= t0
            r["end"] -= t0
            if r["arrived"] is not None:
                r["arrived"] -= t0
    records.sort(key=lambda r: (r["iteration"], r["start"], r["rank"]))
    return ProfiledJob(str(path), sorted(traces), methods, records, unplaced, notes, world)


def _pipelined(trace: RankTrace) -> bool:
    return (
        has_pp_labels(trace)
        or has_single_labels(trace)
        or any(e.name in SEND_OPS or e.name in RECV_OPS for e in trace.events)
    )


def looks_like_job(path: Path) -> Optional[str]:
    """Why ``path`` is a folder (or file) of per-rank profiler traces, or None."""
    if not path.exists():
        return None
    files = [p for p in profile_paths(path)[:64] if has_rank_info(p)]
    if not files:
        return None
    return f"{len(files)} PyTorch profiler trace(s) with distributedInfo (one per rank)"


def rankless(path: Path) -> Optional[str]:
    """Why the profiler traces at ``path`` are not read, when none names its rank (asked when
    no kind recognised the path: a single process's trace, or a compile job's without its
    TORCH_TRACE logs, would otherwise hear only that it is no artifact); None when it has none."""
    if not path.exists():
        return None
    files = [p for p in profile_paths(path)[:64] if b'"traceEvents"' in _head(p, 4096)]
    if not files:
        return None
    return (
        f"{excerpt(str(path))} holds {len(files)} profiler trace(s) but none names its rank "
        "(distributedInfo, written when the profiler runs after init_process_group), and no "
        "TORCH_TRACE log is beside them: give a pipeline job's traces, one per rank, or the "
        "folder holding a compile job's TORCH_TRACE=DIR logs and its traces"
    )


__all__ = ["ProfiledJob", "looks_like_job", "rankless", "read_job"]
