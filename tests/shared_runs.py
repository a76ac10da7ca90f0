"""Real runs that several test modules read, made once per test run (see ``built_once``).

Each test that reads one asserts what it asserted when it launched its own: the run is the
same command, so launching it again would only cost its ranks' start-up (a few CPU-seconds
each on a 2-core machine). A test that changes a folder copies it first.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]


class CliRun(NamedTuple):
    """One ``explorer run`` as a user types it: the process, its run folder and its trace file."""

    done: subprocess.CompletedProcess
    folder: Path
    trace: Path


def cli_1f1b_run(where: Path) -> CliRun:
    """``explorer run --kind 1f1b --stages 2 --microbatches 4 --trace T --out F --json``."""
    folder, trace = where / "run", where / "t.json"
    done = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "run", "--kind", "1f1b", "--stages", "2",
         "--microbatches", "4", "--trace", str(trace), "--out", str(folder), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )  # fmt: skip
    return CliRun(done, folder, trace)


class LessonBuild(NamedTuple):
    """``explorer lesson build --out DIR`` as a teacher types it: the process and its folder."""

    done: subprocess.CompletedProcess
    folder: Path


def all_lessons_built(where: Path) -> LessonBuild:
    """Every lesson, built by the command in a child: the pages the browser tier opens and the
    build's own tests read (the build of lesson 01 alone is about 20 s of CPU)."""
    from cli_in_process import run_cli_child

    folder = where / "lessons"
    return LessonBuild(run_cli_child(["lesson", "build", "--out", folder], timeout=900), folder)
