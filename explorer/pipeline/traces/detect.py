"""The pipeline product's folders for ``explorer read``: a run folder and a DeepSpeed job's live trace."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from explorer.detect import Detector
from explorer.pipeline.traces.flight_recorder import is_flight_folder
from explorer.pipeline.traces.folder import of_torch_engine
from explorer.pipeline.traces.instrumented import is_instrumented
from explorer.pipeline.traces.stack_folder import is_stack_folder


def _run_folder(path: Path) -> Optional[str]:
    """spec.json with the ranks' records, or with the launcher's ``run.lock`` alone: a run whose
    ranks had not written yet (starting, or stopped while starting) is a run folder too, read
    as such by every command (``run --collect`` always read it)."""
    if not (path.is_dir() and (path / "spec.json").is_file()):
        return None
    if any(path.glob("rank*.jsonl")) or (
        (path / "run.lock").is_file() and not of_torch_engine(path)
    ):
        return "a run folder of `explorer run` (spec.json and per-rank rank<R>.jsonl records)"
    return None


def _instrumented(path: Path) -> Optional[str]:
    if is_instrumented(path):
        return "a DeepSpeed job's live trace written by explorer.instrument(engine, out_dir)"
    return None


def _flight_recorder(path: Path) -> Optional[str]:
    if path.is_dir() and not any(path.glob("rank*.jsonl")) and is_flight_folder(path):
        return "the ranks' Flight Recorder dumps (<prefix><rank>, pickle or JSON)"
    return None


def _stacks(path: Path) -> Optional[str]:
    if path.is_dir() and not any(path.glob("rank*.jsonl")) and is_stack_folder(path):
        return (
            "the stacks a job's ranks left (py-spy dumps, tracebacks in their logs, doctor --save)"
        )
    return None


STACKS = Detector(
    "pipeline-stacks",
    "a folder of the stacks a job's ranks left: py-spy dumps, their logs' tracebacks, doctor --save",
    _stacks,
)
FLIGHT_RECORDER = Detector(
    "pipeline-flight-recorder",
    "a folder of a job's per-rank Flight Recorder dumps (_dump_fr_trace, TORCH_FR_DUMP_TEMP_FILE)",
    _flight_recorder,
)
INSTRUMENTED = Detector(
    "pipeline-instrumented",
    "a folder explorer.instrument(engine, DIR) wrote in a DeepSpeed job: rank<R>.jsonl",
    _instrumented,
)
RUN_FOLDER = Detector(
    "pipeline-run",
    "a folder `explorer run --out DIR` wrote: spec.json and rank<R>.jsonl",
    _run_folder,
)

__all__ = ["FLIGHT_RECORDER", "INSTRUMENTED", "RUN_FOLDER", "STACKS"]
