"""What is this artifact? One door (``explorer read PATH``) for everything a job leaves behind.

Each kind the explorer reads registers a :class:`Detector`: a cheap look at a path (names,
a few kilobytes of content; never a whole file) that says whether the path is that kind and
why, and the dotted name of the command-side reader that answers for it. Detectors are tried
in order, most specific first; the first that recognises the path wins. A path no detector
recognises gets one line listing what *can* be read, so the user learns what to point at.

Pure: no torch, no reading of whole files. Readers live where their heavy parts may live.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from explorer.errors import InputError, excerpt


@dataclass(frozen=True)
class Detector:
    """``recognise(path)`` returns why ``path`` is this kind (None: it is not); ``reader`` is
    ``"module:function"``, called as ``function(path, json_out) -> exit code``."""

    kind: str
    what: str
    recognise: Callable[[Path], Optional[str]]
    reader: str


@dataclass(frozen=True)
class Detected:
    kind: str
    why: str
    reader: str


DETECTORS: list[Detector] = []


def register(detector: Detector) -> None:
    """Add a kind (kept in registration order; a kind registered twice replaces the first)."""
    DETECTORS[:] = [d for d in DETECTORS if d.kind != detector.kind] + [detector]


#: Which kind wins when a folder holds several: a compile job's folder may hold profiler traces
#: beside its TORCH_TRACE logs (with distributedInfo whenever a process group existed), and those
#: belong to it. Fixed here, not by registration order, which depends on what imported what first.
PRECEDENCE = ("pipeline-instrumented", "pipeline-run", "torch-trace", "pipeline-profile", "xla")


def _precedence(detector: Detector) -> int:
    return PRECEDENCE.index(detector.kind) if detector.kind in PRECEDENCE else len(PRECEDENCE)


def detect(path: Path) -> Detected:
    """The kind of ``path``, or an InputError naming every kind the explorer reads."""
    if not path.exists():
        raise InputError(
            f"{excerpt(str(path))} does not exist: give a file or folder a job left behind"
        )
    if not (path.is_file() or path.is_dir()):
        raise InputError(
            f"{excerpt(str(path))} is neither a regular file nor a folder (a device, a pipe or a "
            "socket): give a file or folder a job left behind"
        )
    for d in sorted(DETECTORS, key=_precedence):
        why = d.recognise(path)
        if why:
            return Detected(d.kind, why, d.reader)
    kinds = "; ".join(f"{d.kind} ({d.what})" for d in DETECTORS)
    raise InputError(
        f"{excerpt(str(path))} is not an artifact the explorer reads; it reads: {kinds}"
    )


def _run_folder(path: Path) -> Optional[str]:
    if path.is_dir() and (path / "spec.json").is_file() and any(path.glob("rank*.jsonl")):
        return "a run folder of `explorer run` (spec.json and per-rank rank<R>.jsonl records)"
    return None


def _instrumented(path: Path) -> Optional[str]:
    from explorer.traces.pipeline.instrumented import is_instrumented

    if is_instrumented(path):
        return "a DeepSpeed job's live trace written by explorer.instrument(engine, out_dir)"
    return None


register(
    Detector(
        "pipeline-instrumented",
        "a folder explorer.instrument(engine, DIR) wrote in a DeepSpeed job: rank<R>.jsonl",
        _instrumented,
        "explorer.commands.read_instrumented:read",
    )
)

register(
    Detector(
        "pipeline-run",
        "a folder `explorer run --out DIR` wrote: spec.json and rank<R>.jsonl",
        _run_folder,
        "explorer.commands.read_run:read",
    )
)


import explorer.traces.profiler.detect  # noqa: E402,F401  (registers per-rank profiler traces)
import explorer.traces.torch_trace_detect  # noqa: E402,F401  (registers the torch-trace kind)
import explorer.traces.xla.detect  # noqa: E402,F401  (registers the xla kind)

__all__ = ["Detector", "Detected", "DETECTORS", "PRECEDENCE", "register", "detect"]
