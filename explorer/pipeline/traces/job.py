"""A job of thousands of ranks read into columns: each rank file once, no object kept per event.

A job of 1,024 ranks x 10,000 instructions is ten million events; as dicts that is gigabytes
and minutes. So each rank file is read in one piece, decoded in one call and reduced to numpy
columns (rank, stage, iteration, kind, micro-batch, start, end) before the next is opened:
memory is the columns (29 bytes an event) plus one file's decoded lines.

The decoder is msgspec when it is installed (``pip install explorer[scale]``): it decodes only
the fields read here into typed records, about three times faster than the standard library's
``json``, which is the fallback (the answer is the same).

A job of at least :data:`PARALLEL_BYTES` is read on every core: chunks of ranks in worker
processes, their columns taken back in rank order (the answer is the same as one process's).

A rank that cannot be read does not stop the job: a missing file, a file cut short (its lines
before the cut are kept), lines of another run, lines that name another rank; each is an
:class:`Unread` the report names. Times stay as each rank wrote them, with each rank's ``unix``
start, so clock offsets can be estimated from the columns later.
"""

from __future__ import annotations

import gc
import importlib
import json
import math
import os
from dataclasses import dataclass, field
from functools import cache
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterator, Optional

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import parse_instruction
from explorer.pipeline.traces.job_folder import PROFILER, JobLayout, layout
from explorer.pipeline.traces.mesh import Mesh
from explorer.pipeline.traces.rank_read import RankRead, Unread
from explorer.processes.pool import Progress, in_order

#: What a JSON line lacks reads as this (msgspec's defaults are the same).
_DEFAULTS = {
    "type": "",
    "run": "",
    "rank": -1,
    "unix": math.nan,
    "stage": -1,
    "iteration": -1,
    "microbatch": -1,
    "text": "",
    "start": math.nan,
    "end": math.nan,
    "kind": "",
    "message": "",
}


@dataclass(frozen=True, eq=False)
class JobTrace:
    """Every instruction of a job as parallel columns, and what could not be read."""

    layout: JobLayout
    rank: np.ndarray
    stage: np.ndarray
    iteration: np.ndarray
    kind: np.ndarray
    microbatch: np.ndarray
    start: np.ndarray
    end: np.ndarray
    #: Each rank's ``unix`` time at its start line (NaN: none), indexed by rank.
    unix: np.ndarray
    unread: tuple[Unread, ...] = ()
    interrupted: bool = False
    decoder: str = "json"
    extra: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.rank)

    @property
    def replica(self) -> np.ndarray:
        """Each event's data-parallel replica (as the layout numbers its ranks)."""
        return self.layout.replica_of(self.rank)

    def nbytes(self) -> int:
        return sum(
            getattr(self, c).nbytes
            for c in ("rank", "stage", "iteration", "kind", "microbatch", "start", "end")
        )


@cache
def _msgspec() -> Any:
    """msgspec, an optional extra (``explorer[scale]``), imported by name: None when absent."""
    try:
        return importlib.import_module("msgspec")
    except ImportError:
        return None


@cache
def _msgspec_decoder() -> Optional[Any]:
    """A msgspec decoder of the fields read here, or None when msgspec is not installed."""
    msgspec = _msgspec()
    if msgspec is None:
        return None

    class Line(msgspec.Struct, gc=False):  # primitives only: no cycle to collect
        type: str = ""
        rank: int = -1
        run: str = ""
        iteration: int = -1
        stage: int = -1
        microbatch: int = -1
        text: str = ""
        start: float = math.nan
        end: float = math.nan
        unix: float = math.nan
        kind: str = ""  # a failure line's kind and message: how the rank ended
        message: str = ""

    return msgspec.json.Decoder(Line)


def decoder_name() -> str:
    return "msgspec" if _msgspec_decoder() is not None else "json"


def _decode(lines: list[bytes]) -> list:
    """These lines as records (ValueError when one is not a record): the path of broken files."""
    dec = _msgspec_decoder()
    if dec is None:
        recs = json.loads(b"[" + b",".join(lines) + b"]")
        if not all(isinstance(r, dict) for r in recs):
            raise ValueError("a line is not a JSON object")
        return recs
    try:
        return [dec.decode(x) for x in lines]
    except _msgspec().DecodeError as exc:  # ValidationError is a DecodeError
        raise ValueError(str(exc)) from None


def _decode_file(data: bytes) -> list:
    """A whole rank file (JSON lines): msgspec reads the lines as they are, json as one array."""
    dec = _msgspec_decoder()
    if dec is None:
        return _decode([x for x in data.split(b"\n") if x.strip()])
    try:
        return dec.decode_lines(data)
    except _msgspec().DecodeError as exc:
        raise ValueError(str(exc)) from None


def _good_prefix(lines: list[bytes]) -> int:
    """How many lines from the first decode one by one (only for a broken file)."""
    for i, line in enumerate(lines):
        try:
            _decode([line])
        except ValueError:
            return i
    return len(lines)


@cache
def _kind_of(text: str) -> int:
    try:
        return int(parse_instruction(text).kind)
    except InputError:
        return -1


def _get(recs: list, name: str) -> list:
    """One field of every record, in one pass (records are dicts or msgspec structs)."""
    if recs and isinstance(recs[0], dict):
        default = _DEFAULTS.get(name)
        return [r.get(name, default) for r in recs]
    return list(map(attrgetter(name), recs))


def _kinds(texts: list[str]) -> np.ndarray:
    """Instruction kinds from their texts (``1F0b0``), each distinct text parsed once."""
    kind = {t: _kind_of(t) for t in set(texts)}
    return np.fromiter(map(kind.__getitem__, texts), dtype=np.int8, count=len(texts))


def _columns(recs: list, rank: int, keep: np.ndarray) -> dict[str, np.ndarray]:
    """The instruction columns of the records where ``keep`` is True."""
    return {
        "rank": np.full(int(keep.sum()), rank, dtype=np.int32),
        "stage": np.array(_get(recs, "stage"), dtype=np.int16)[keep],
        "iteration": np.array(_get(recs, "iteration"), dtype=np.int32)[keep],
        "kind": _kinds(_get(recs, "text"))[keep],
        "microbatch": np.array(_get(recs, "microbatch"), dtype=np.int32)[keep],
        "start": np.array(_get(recs, "start"), dtype=np.float64)[keep],
        "end": np.array(_get(recs, "end"), dtype=np.float64)[keep],
    }


def _ending(recs: list, own: np.ndarray, types: np.ndarray) -> Optional[str]:
    """How a rank that did not end well ended, in words (None: it wrote ``done``). A rank that
    failed, read another micro-batch's data (a ``hazard`` line: the run failed, as ``read`` of
    its folder says), or wrote no end at all (killed, stopped, still running, or its file cut at a line's
    end, which no decoder notices), is no rank that ran its schedule: its lines are kept and the
    job's verdict says so, as ``read`` of one run folder does."""
    failed = np.flatnonzero(own & (types == "failure"))
    if len(failed):
        first = recs[int(failed[0])]
        kind, message = _get([first], "kind")[0] or "error", _get([first], "message")[0] or ""
        return f"it failed ({kind}): {' '.join(str(message).split())[:300]}"
    hazards = np.flatnonzero(own & (types == "hazard"))
    if len(hazards):  # nothing crashed, and the engine computed on another micro-batch's data
        message = _get([recs[int(hazards[0])]], "message")[0] or ""
        return (
            f"it read another micro-batch's data (hazard): {' '.join(str(message).split())[:300]}"
        )
    if not (own & (types == "done")).any():
        return (
            "it wrote no end (no done or failure line): it was killed or stopped, is still "
            "running, or its file was cut"
        )
    return None


def read_rank(
    path: Path, rank: int, run: str
) -> tuple[Optional[dict[str, np.ndarray]], Optional[Unread], float]:
    """One rank file: its instruction columns, what was wrong with it, its ``unix`` start."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, Unread(rank, f"cannot be read ({exc.strerror})"), math.nan
    problem = None
    try:
        recs = _decode_file(data)
    except ValueError:
        lines = [x for x in data.split(b"\n") if x.strip()]
        good = _good_prefix(lines)
        problem = f"line {good + 1} of {len(lines)} is not a JSON record (cut short?)"
        recs = _decode(lines[:good])
    if not recs:
        return None, Unread(rank, problem or "its file is empty"), math.nan
    types = np.array(_get(recs, "type"), dtype=str)
    runs = _get(recs, "run")
    own = np.ones(len(recs), dtype=bool)
    if run and set(runs) - {"", run}:
        own = np.isin(np.array(runs, dtype=str), ["", run])
        if not own.any():
            return (
                None,
                Unread(rank, f"written by another run ({runs[0]}), not this job's {run}"),
                math.nan,
            )
        problem = problem or f"{int((~own).sum())} of its lines are of another run (left out)"
    instr = own & (types == "instr")
    named = set(np.array(_get(recs, "rank"))[instr].tolist()) - {rank}
    if named:
        return None, Unread(rank, f"its lines say rank {sorted(named)[0]}"), math.nan
    starts = np.flatnonzero(own & (types == "start"))
    unix = _get(recs, "unix")[starts[0]] if len(starts) else math.nan
    try:
        cols = _columns(recs, rank, instr) if instr.any() else None
    except (ValueError, TypeError):  # json's records are not typed: a field of the wrong type
        return None, Unread(rank, "its instruction lines hold fields of the wrong type"), math.nan
    if problem is None and cols is None:
        problem = "it holds no instruction"
    ending = None if problem else _ending(recs, own, types)
    kept = int(instr.sum())
    unread = (
        Unread(rank, problem, kept)
        if problem
        else Unread(rank, ending, kept, ended=True)
        if ending
        else None
    )
    return cols, unread, float(unix) if unix is not None else math.nan


def _read_ranks(
    lay: JobLayout,
    parts: list[dict[str, np.ndarray]],
    unread: list[Unread],
    unix: np.ndarray,
    progress: Optional[Progress],
    workers: int = 1,
) -> bool:
    """Read every rank in order into ``parts``/``unread``/``unix``; True when Ctrl-C stopped it.
    With ``workers`` > 1 the files are read in that many processes, in chunks of ranks, and
    taken back in rank order."""
    total = lay.ranks
    results = _in_processes(lay, workers)
    done = 0
    try:
        for rank, (cols, problem, rank_unix) in results:
            unix[rank] = rank_unix
            if cols is not None:
                parts.append(cols)
            if problem is not None:
                unread.append(problem)
            done = rank + 1
            if progress is not None:
                progress(done, total)
    except KeyboardInterrupt:
        unread.extend(Unread(r, "not read (interrupted)") for r in range(done, total))
        return True
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()
    return False


@dataclass(frozen=True)
class _How:
    """What reading one rank file needs besides its path (picklable, for the workers)."""

    format: str
    run: str
    world: Optional[int]

    def read(self, path: Optional[str], rank: int) -> RankRead:
        if not path:
            return None, Unread(rank, "no rank file"), math.nan
        if self.format == PROFILER:
            from explorer.pipeline.traces.profiler.columns import read_trace_rank

            return read_trace_rank(Path(path), rank, self.world)
        return read_rank(Path(path), rank, self.run)

    def read_item(self, item: tuple[int, Optional[str]]) -> tuple[int, RankRead]:
        """One ``(rank, path)`` of the pool's items, read and tagged with its rank."""
        rank, path = item
        return rank, self.read(path, rank)


def _how(lay: JobLayout) -> _How:
    """How this job's files are read; a profiler job's world size is its first trace's."""
    world = None
    if lay.format == PROFILER and lay.files:
        from explorer.pipeline.traces.profiler.columns import world_of

        world = world_of(lay.files[min(lay.files)])
    return _How(lay.format, lay.run, world)


def _in_processes(lay: JobLayout, workers: int) -> Iterator[tuple[int, RankRead]]:
    """The ranks read in rank order, by ``workers`` processes (the base's pool: ``spawn``,
    chunks of ranks, a Ctrl-C cancels what has not started and keeps what has come back)."""
    files = [(r, str(lay.files[r]) if r in lay.files else None) for r in range(lay.ranks)]
    return in_order(_how(lay).read_item, files, workers)


#: Below this many bytes of rank files a job is read in this process: starting workers costs
#: more than it saves (each imports numpy and the decoder).
PARALLEL_BYTES = 256 << 20


def workers_for(lay: JobLayout, workers: Optional[int] = None) -> int:
    """How many processes read the job: ``workers`` when given, else every core once the files
    are large enough to pay for starting them."""
    if workers is not None:
        return max(1, workers)
    size = sum(p.stat().st_size for p in lay.files.values() if p.exists())
    return (os.cpu_count() or 1) if size >= PARALLEL_BYTES else 1


def read_job(
    folder: Path,
    progress: Optional[Progress] = None,
    workers: Optional[int] = None,
    mesh: Optional[Mesh] = None,
) -> JobTrace:
    """Every rank file of the job in ``folder``; Ctrl-C stops the reading and keeps what was
    read. ``workers``: processes reading the files (default: every core for a job of at least
    :data:`PARALLEL_BYTES`, else this process alone); the answer is the same either way.
    ``mesh``: how the user says the ranks are numbered (else the folder says it)."""
    lay = layout(Path(folder), mesh)
    parts: list[dict[str, np.ndarray]] = []
    unread: list[Unread] = []
    unix = np.full(lay.ranks, np.nan)
    collecting = gc.isenabled()
    gc.disable()  # each file's records are freed by reference counting; collections halve the speed
    try:
        interrupted = _read_ranks(lay, parts, unread, unix, progress, workers_for(lay, workers))
    finally:
        if collecting:
            gc.enable()
    if not parts:
        raise InputError(
            f"no rank of {lay.folder} could be read ({'; '.join(u.sentence() for u in unread[:3])}): "
            "point explorer read at a job's folder"
        )
    joined = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    parts.clear()
    if lay.format != PROFILER:
        _stages_known(lay, joined["rank"], joined["stage"])
        _numbering_holds(lay, joined["rank"], joined["stage"], mesh)
    return JobTrace(
        lay,
        rank=joined["rank"],
        stage=joined["stage"],
        iteration=joined["iteration"],
        kind=joined["kind"],
        microbatch=joined["microbatch"],
        start=joined["start"],
        end=joined["end"],
        unix=unix,
        unread=tuple(unread),
        interrupted=interrupted,
        decoder="json" if lay.format == PROFILER else decoder_name(),
    )


def _stages_known(lay: JobLayout, rank: np.ndarray, stage: np.ndarray) -> None:
    """Refuse an instruction line of a stage the schedule does not have: every rank runs stages
    of spec.json's schedule, so such a line is another job's or an edited one (the fold once
    raised an IndexError on it)."""
    unknown = np.flatnonzero((stage < 0) | (stage >= lay.stages))
    if not len(unknown):
        return
    r, st = int(rank[unknown[0]]), int(stage[unknown[0]])
    raise InputError(
        f"rank {r}'s lines name stage {st}, which the schedule in spec.json does not have "
        f"(stages 0 to {lay.stages - 1}): the file is another job's or was edited; remove it, "
        "or copy the job's folder whole"
    )


def _numbering_holds(
    lay: JobLayout, rank: np.ndarray, stage: np.ndarray, mesh: Optional[Mesh]
) -> None:
    """Refuse a numbering the ranks' own lines contradict: each engine line names its stage,
    and the schedule says which of its ranks runs that stage. A mesh laid the other way put
    rank 1 at stage 0 while its lines were stage 1's; the report then mixed the two."""
    known = (stage >= 0) & (stage < lay.stages)
    runs_on = np.asarray(lay.stage_to_rank)[np.where(known, stage, 0)]
    wrong = np.flatnonzero(known & (runs_on != lay.local_of(rank)))
    if not len(wrong):
        return
    first = int(wrong[0])
    r, st = int(rank[first]), int(stage[first])
    said = f"--mesh {mesh.spelled()}" if mesh is not None else f"the numbering {lay.numbering()}"
    fix = (
        "drop --mesh, or swap its dimensions"
        if mesh is not None
        else (
            f"give --mesh as the job numbered its ranks (--mesh pp={lay.pipeline_ranks},"
            f"dp={lay.replicas} for rank = the schedule's rank * replicas + replica)"
        )
    )
    raise InputError(
        f"{said} places rank {r} at the schedule's rank {int(lay.local_of(r))}, but its lines "
        f"are stage {st}'s, which the schedule runs on its rank {lay.stage_to_rank[st]}: {fix}"
    )


__all__ = [
    "PARALLEL_BYTES",
    "JobTrace",
    "Progress",
    "Unread",
    "decoder_name",
    "read_job",
    "read_rank",
    "workers_for",
]
