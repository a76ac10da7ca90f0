"""A job folder: one run of a pipeline schedule on several data-parallel replicas, a rank file each.

A run folder of ``explorer run`` holds one pipeline: its ``spec.json`` schedule maps stages to
P ranks and it has ``rank0.jsonl`` to ``rank<P-1>.jsonl``. A job of D replicas of that pipeline
has the same ``spec.json`` and ``rank0.jsonl`` to ``rank<P*D-1>.jsonl``, rank ``replica * P + r``
running the schedule's rank ``r`` (the layout of a data-parallel job whose replicas are
pipelines of consecutive ranks). So a folder is a job when it has a rank file beyond the
schedule's ranks; its size is read from the folder, never from the lines (which may be broken).

Light: no numpy here, so ``explorer read`` can detect without loading the reader.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from explorer.detect import Detector
from explorer.errors import InputError

_RANK_FILE = re.compile(r"rank(\d+)\.jsonl")


@dataclass(frozen=True)
class JobLayout:
    """What the folder itself says: the run, its schedule's ranks and stages, the rank files."""

    folder: Path
    run: str
    stage_to_rank: tuple[int, ...]
    files: dict[int, Path]

    @property
    def pipeline_ranks(self) -> int:
        return len(set(self.stage_to_rank))

    @property
    def stages(self) -> int:
        return len(self.stage_to_rank)

    @property
    def replicas(self) -> int:
        """Whole replicas up to the highest rank file (a missing last rank still counts)."""
        top = max(self.files, default=-1) + 1
        return -(-top // self.pipeline_ranks)

    @property
    def ranks(self) -> int:
        return self.replicas * self.pipeline_ranks


def rank_files(folder: Path) -> dict[int, Path]:
    """``{rank: path}`` of the ``rank<R>.jsonl`` files in ``folder`` (one directory scan)."""
    out: dict[int, Path] = {}
    with os.scandir(folder) as it:
        for entry in it:
            m = _RANK_FILE.fullmatch(entry.name)
            if m:
                out[int(m.group(1))] = Path(entry.path)
    return out


def _spec(folder: Path) -> Optional[dict]:
    try:
        spec = json.loads((folder / "spec.json").read_text())
        to_rank = spec["schedule"]["stage_to_rank"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(to_rank, list) or not to_rank:
        return None
    return spec


def layout(folder: Path) -> JobLayout:
    """The job's layout, or an InputError saying what the folder lacks."""
    folder = Path(folder)
    spec = _spec(folder) if folder.is_dir() else None
    if spec is None:
        raise InputError(
            f"{folder} is not a job folder: it needs a spec.json with the schedule's stage_to_rank "
            "(as `explorer run --out DIR` writes) beside rank<R>.jsonl files"
        )
    files = rank_files(folder)
    if not files:
        raise InputError(
            f"{folder} has no rank<R>.jsonl files: point explorer read at a job's folder"
        )
    to_rank = tuple(int(r) for r in spec["schedule"]["stage_to_rank"])
    return JobLayout(folder, str(spec.get("run_id", "")), to_rank, files)


def _job_folder(path: Path) -> Optional[str]:
    if not path.is_dir() or not (path / "spec.json").is_file():
        return None
    spec = _spec(path)
    if spec is None:
        return None
    p = len(set(spec["schedule"]["stage_to_rank"]))
    files = rank_files(path)
    if files and max(files) >= p:
        return (
            f"a pipeline job's folder: {len(files)} rank files, replicas of the {p}-rank "
            "pipeline in spec.json"
        )
    return None


JOB_FOLDER = Detector(
    "pipeline-job",
    "a job's folder: spec.json of one pipeline and rank<R>.jsonl for each rank of its replicas",
    _job_folder,
)

__all__ = ["JOB_FOLDER", "JobLayout", "layout", "rank_files"]
