"""A job folder: one run of a pipeline schedule on several data-parallel replicas, a rank file each.

A run folder of ``explorer run`` holds one pipeline: its ``spec.json`` schedule maps stages to
P ranks and it has ``rank0.jsonl`` to ``rank<P-1>.jsonl``. A job of D replicas of that pipeline
has the same ``spec.json`` and ``rank0.jsonl`` to ``rank<P*D-1>.jsonl``, rank ``replica * P + r``
running the schedule's rank ``r`` (the layout of a data-parallel job whose replicas are
pipelines of consecutive ranks). So a folder is a job when it has a rank file beyond the
schedule's ranks; its size is read from the folder, never from the lines (which may be broken).

The same job run by PyTorch's own pipeline runtime under the profiler (``explorer run --engine
torch`` writes its ``spec.json`` and a Chrome trace per rank, ``torch_rank<R>.json``) is a job of
profiler traces: the same layout, another file per rank (:data:`PROFILER`). A folder holds one
format; when it holds both, the explorer's own rank files are read.

Light: no numpy here, so ``explorer read`` can detect without loading the reader.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional

from explorer.detect import Detector
from explorer.errors import InputError, excerpt
from explorer.pipeline.traces.mesh import PIPE_MAJOR, REPLICA_MAJOR, Mesh

#: The explorer's rank files (``instr`` lines) and PyTorch profiler traces, one per rank.
ENGINE, PROFILER = "engine", "profiler"
_RANK_FILES = {
    ENGINE: re.compile(r"rank(\d+)\.jsonl"),
    PROFILER: re.compile(r"torch_rank(\d+)\.json"),
}
_WHAT = {ENGINE: "rank<R>.jsonl files", PROFILER: "torch_rank<R>.json profiler traces"}


@dataclass(frozen=True)
class JobLayout:
    """What the folder itself says: the run, its schedule's ranks and stages, the rank files."""

    folder: Path
    run: str
    stage_to_rank: tuple[int, ...]
    files: dict[int, Path]
    #: :data:`ENGINE` or :data:`PROFILER`: how each rank file is read.
    format: str = ENGINE
    #: :data:`REPLICA_MAJOR` or :data:`PIPE_MAJOR`: how ranks are numbered.
    order: str = REPLICA_MAJOR
    #: The job's world size when the folder says it (else the highest rank file decides).
    world: Optional[int] = None

    @property
    def pipeline_ranks(self) -> int:
        return len(set(self.stage_to_rank))

    @property
    def stages(self) -> int:
        return len(self.stage_to_rank)

    @property
    def replicas(self) -> int:
        """Whole replicas up to the world size, or the highest rank file (a missing last rank
        still counts)."""
        top = self.world if self.world else max(self.files, default=-1) + 1
        return -(-top // self.pipeline_ranks)

    @property
    def ranks(self) -> int:
        return self.replicas * self.pipeline_ranks

    # Each of these takes an int or a numpy array of ranks (plain arithmetic: no numpy here).
    def replica_of(self, rank: Any) -> Any:
        """The data-parallel replica ``rank`` belongs to."""
        if self.order == PIPE_MAJOR:
            return rank % self.replicas
        return rank // self.pipeline_ranks

    def local_of(self, rank: Any) -> Any:
        """``rank``'s place in its replica's pipeline (the schedule's rank)."""
        if self.order == PIPE_MAJOR:
            return rank // self.replicas
        return rank % self.pipeline_ranks

    def rank_at(self, replica: Any, local: Any) -> Any:
        """The rank at pipeline place ``local`` of ``replica``."""
        if self.order == PIPE_MAJOR:
            return local * self.replicas + replica
        return replica * self.pipeline_ranks + local

    def numbering(self) -> str:
        """The layout in words, for the report."""
        if self.order == PIPE_MAJOR:
            return "rank = the schedule's rank * replicas + replica"
        return "rank = replica * pipeline_ranks + the schedule's rank"


def rank_files(folder: Path, format: str = ENGINE) -> dict[int, Path]:
    """``{rank: path}`` of the folder's rank files of ``format`` (one directory scan)."""
    pattern = _RANK_FILES[format]
    out: dict[int, Path] = {}
    with os.scandir(folder) as it:
        for entry in it:
            m = pattern.fullmatch(entry.name)
            if m:
                out[int(m.group(1))] = Path(entry.path)
    return out


def _files(folder: Path) -> tuple[str, dict[int, Path]]:
    """The folder's rank files and their format: the explorer's own when it has any."""
    for format in (ENGINE, PROFILER):
        files = rank_files(folder, format)
        if files:
            return format, files
    return ENGINE, {}


def _spec(folder: Path) -> Optional[dict]:
    """The folder's spec.json when it holds a schedule, its stage_to_rank checked (an
    InputError naming the file); None when it is not one to read here (the run reader says why)."""
    path = folder / "spec.json"
    try:
        spec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    schedule = spec.get("schedule") if isinstance(spec, dict) else None
    if not isinstance(schedule, dict) or "stage_to_rank" not in schedule:
        return None
    stage_ranks(schedule, path)
    return spec


def stage_ranks(schedule: dict, path: Path) -> tuple[int, ...]:
    """The spec's ``stage_to_rank``: a rank integer per stage, or an InputError naming ``path``.

    Checked where spec.json is read, before anything counts or numbers ranks by it: a list,
    a string or a float there ended in a TypeError, ValueError or OverflowError from ``set()``
    and ``int()``, inside detection, where the user could not tell which file was wrong. A rank
    is below the world size, and a pipeline of S stages has at most S ranks (each runs a stage).
    """
    to_rank = schedule.get("stage_to_rank")
    if isinstance(to_rank, list) and to_rank and all(_is_rank(r, len(to_rank)) for r in to_rank):
        idle = sorted(set(range(max(to_rank) + 1)) - set(to_rank))
        if idle:  # every rank of a pipeline runs a stage: a rank without one was never started
            raise InputError(
                f"{excerpt(str(path))}: stage_to_rank {excerpt(json.dumps(to_rank))} gives rank "
                f"{idle[0]} no stage; every rank runs at least one: write the stage_to_rank "
                "`explorer run` wrote"
            )
        return tuple(to_rank)
    stages = len(to_rank) if isinstance(to_rank, list) else 0
    raise InputError(
        f"{excerpt(str(path))}: stage_to_rank must be a list of rank integers, one per stage, each "
        f"0 <= rank < world size (at most {stages} ranks for {stages} stages), got "
        f"{excerpt(json.dumps(to_rank))}: write the stage_to_rank `explorer run` wrote"
    )


def _is_rank(value: object, stages: int) -> bool:
    """An integer (not a bool) from 0 to below ``stages``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < stages


def start_lines(path: Path) -> list[dict]:
    """Every ``start`` line of an instrumented rank file, in order: a folder the job wrote into
    twice holds each run's, and the last is the run read (as the traced-job reader does)."""
    out = []
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return out
    for raw in data.split(b"\n"):
        if b'"start"' not in raw:
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if isinstance(line, dict) and line.get("type") == "start":
            out.append(line)
    return out


def _sizes(start: dict) -> Optional[tuple[int, int, int]]:
    """(stages, world size, replicas) of an instrument's start line of a data-parallel job."""
    try:
        p, n, d = (int(start[k]) for k in ("num_stages", "world_size", "data_parallel_size"))
    except (KeyError, TypeError, ValueError):
        return None
    return (p, n, d) if d > 1 and p >= 1 and p * d == n else None


def _order(files: dict[int, Path], p: int, d: int, run: object) -> Optional[str]:
    """How the ranks are numbered, from what sampled ranks' start lines of ``run`` say (stage,
    replica)."""
    sample = sorted({0, 1, d - 1, d, p, p * d - 1} & set(files))
    said = {}
    for rank in sample:
        starts = [x for x in start_lines(files[rank]) if x.get("run") == run]
        if starts:
            stages = starts[-1].get("stages") or [None]
            said[rank] = (stages[0], starts[-1].get("replica"))
    for order, place in (
        (PIPE_MAJOR, lambda r: (r // d, r % d)),
        (REPLICA_MAJOR, lambda r: (r % p, r // p)),
    ):
        if said and all(said[r] == place(r) for r in said):
            return order
    return None


def instrument_layout(folder: Path) -> Optional[JobLayout]:
    """The layout of a data-parallel job ``explorer.instrument`` traced (its start lines say
    the stages, the world size and each rank's replica), or None when the folder is not one;
    an InputError when its ranks are numbered in a way the reader does not lay out."""
    files = rank_files(folder)
    if 0 not in files:
        return None
    starts = start_lines(files[0])
    sizes = _sizes(starts[-1]) if starts else None
    if sizes is None or starts[-1].get("source") != "deepspeed":
        return None
    p, n, d = sizes
    order = _order(files, p, d, starts[-1].get("run"))
    if order is None:
        raise InputError(
            f"{folder}: its ranks are numbered neither pipe-major (rank = stage x {d} + replica, "
            f"DeepSpeed's) nor replica-major (rank = replica x {p} + stage): read it rank by rank "
            "with explorer read on a copy holding one replica's rank files"
        )
    run = str(starts[-1].get("run", ""))
    return JobLayout(folder, run, tuple(range(p)), files, ENGINE, order, n)


def layout(folder: Path, mesh: Optional[Mesh] = None) -> JobLayout:
    """The job's layout (numbered as the user's ``mesh`` says, where given), or an InputError
    saying what the folder lacks or where it contradicts the mesh."""
    lay, said = _layout(Path(folder))
    return lay if mesh is None else _numbered_as(lay, mesh, said_by_ranks=said)


def _layout(folder: Path) -> tuple[JobLayout, bool]:
    """The layout the folder itself says, and whether its numbering came from the ranks' own
    start lines (an instrumented job) rather than the default."""
    spec = _spec(folder) if folder.is_dir() else None
    if spec is None and folder.is_dir() and not (folder / "spec.json").exists():
        traced = instrument_layout(folder)
        if traced is not None:
            return traced, True
    if spec is None:
        raise InputError(
            f"{folder} is not a job folder: it needs a spec.json with the schedule's stage_to_rank "
            "(as `explorer run --out DIR` writes) beside rank<R>.jsonl files or torch_rank<R>.json "
            "profiler traces"
        )
    format, files = _files(folder)
    if not files:
        raise InputError(
            f"{folder} has no rank<R>.jsonl files and no torch_rank<R>.json profiler traces: "
            "point explorer read at a job's folder"
        )
    to_rank = stage_ranks(spec["schedule"], folder / "spec.json")
    return JobLayout(folder, str(spec.get("run_id", "")), to_rank, files, format), False


def _numbered_as(lay: JobLayout, mesh: Mesh, said_by_ranks: bool) -> JobLayout:
    """``lay`` numbered as ``mesh`` says, or an InputError where the folder contradicts it.

    ``said_by_ranks``: the layout's numbering came from the ranks' own start lines, so a mesh
    that numbers them otherwise is a mistake to name, not an order to follow."""
    where = str(lay.folder)
    if mesh.pp != lay.pipeline_ranks:
        raise InputError(
            f"--mesh {mesh.spelled()} says pp={mesh.pp}, but the schedule of {where} runs on "
            f"{lay.pipeline_ranks} ranks: give pp={lay.pipeline_ranks}"
        )
    top = max(lay.files, default=-1)
    if top >= mesh.ranks:
        need = -(-(top + 1) // mesh.pp)
        raise InputError(
            f"--mesh {mesh.spelled()} holds ranks 0-{mesh.ranks - 1}, but {where} has a file of "
            f"rank {top}: give dp={need} or more"
        )
    if lay.world is not None and lay.world != mesh.ranks:
        raise InputError(
            f"--mesh {mesh.spelled()} names {mesh.ranks} ranks, but the ranks of {where} say the "
            f"job had {lay.world}: give dp={lay.world // mesh.pp}"
        )
    if said_by_ranks and lay.order != mesh.order:
        raise InputError(
            f"--mesh {mesh.spelled()} numbers the ranks {mesh.order}, but the ranks of {where} "
            f"say they were numbered {lay.order} ({lay.numbering()}): drop --mesh, or swap its "
            "dimensions"
        )
    return replace(lay, order=mesh.order, world=mesh.ranks)


def _job_folder(path: Path) -> Optional[str]:
    if not path.is_dir():
        return None
    if not (path / "spec.json").is_file():
        return _traced_job(path)
    format, files = _files(path)
    spec = _spec(path) if files else None  # rank files beside it: a spec to check, not a stray one
    if spec is None:
        return None
    p = len(set(spec["schedule"]["stage_to_rank"]))
    if max(files) >= p and not _strays(spec, format, [files[r] for r in files if r >= p]):
        return (
            f"a pipeline job's folder: {len(files)} {_WHAT[format]}, replicas of the {p}-rank "
            "pipeline in spec.json"
        )
    return None


def _strays(spec: dict, format: str, beyond: list[Path]) -> bool:
    """Rank files past the spec's pipeline that are none of its run's (a file copied in from
    another run, or a copy of one of its own ranks' files under another name): they make no
    replicas, and the folder stays the one run it is. A job's replicas start with the spec's
    run id, each in the file of the rank its start line names; a folder whose spec names no
    run keeps the old reading. A copy (``cp rank1.jsonl rank5.jsonl``) once made ``read`` see
    three replicas, two of them missing, where ``check`` and ``run --collect`` saw the run."""
    run = spec.get("run_id")
    if not run or format != ENGINE:
        return False
    starts = [(path, x) for path in beyond for x in start_lines(path)]
    named = [x.get("run") for _, x in starts]
    if named and run not in named:  # files that name no run keep the old reading
        return True
    return bool(starts) and all(x.get("rank") != file_rank(path) for path, x in starts)


def file_rank(path: Path) -> Optional[int]:
    """The rank a rank file's name gives (``rank5.jsonl`` -> 5), else None."""
    named = _RANK_FILES[ENGINE].fullmatch(path.name)
    return int(named.group(1)) if named else None


def _traced_job(path: Path) -> Optional[str]:
    try:
        lay = instrument_layout(path)
    except InputError as exc:  # a job, laid out in a way the reader cannot: said when read
        return f"a data-parallel job traced by explorer.instrument ({exc})"
    if lay is None:
        return None
    return (
        f"a data-parallel job traced by explorer.instrument: {len(lay.files)} rank files, "
        f"{lay.replicas} replicas of a {lay.pipeline_ranks}-stage pipeline ({lay.order})"
    )


JOB_FOLDER = Detector(
    "pipeline-job",
    "a job's folder: spec.json of one pipeline, a rank<R>.jsonl or torch_rank<R>.json per rank",
    _job_folder,
)

__all__ = [
    "ENGINE",
    "JOB_FOLDER",
    "PIPE_MAJOR",
    "PROFILER",
    "REPLICA_MAJOR",
    "JobLayout",
    "file_rank",
    "layout",
    "rank_files",
    "start_lines",
]
