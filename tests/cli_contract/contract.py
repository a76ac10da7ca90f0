"""The bad-input contract every command's table asserts, in two tiers.

Every bad invocation must end with exit 2, exactly one line on stderr that names the
constraint (``needle``), no traceback, nothing on stdout, within a time bound and (measured
with ``wait4``) a memory bound.

Each table is asserted twice. In the fast tier, :func:`assert_bad_input_in_process` calls
``explorer.cli.main`` in the test's own interpreter: the same exit code, the same one line, no
traceback, no stdout, the time bound; what it cannot see is the memory bound and anything that
only shows in a fresh interpreter (a stray import at start-up, the process's real exit). The
slow tier runs :func:`assert_bad_input` on the whole table through ``python -m explorer.cli`` in
a child, which checks all of it. :func:`tiers` makes the two parameter lists from one table.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import pytest

ROOT = Path(__file__).resolve().parents[2]
HLO_DATA = ROOT / "tests" / "data" / "hlo"
MEASURE = Path(__file__).with_name("measure.py")

#: Default bounds for one bad invocation: refused at the edge, so fast and small.
SECONDS = 15.0
MEGABYTES = 400


@dataclass(frozen=True)
class Case:
    """One bad invocation: its arguments (``{d}`` is the fixture folder), the words the line must hold."""

    id: str
    argv: Sequence[str]
    needle: str
    seconds: float = SECONDS
    megabytes: int = MEGABYTES
    marks: tuple = ()

    def param(self):
        return pytest.param(self, id=self.id, marks=self.marks)

    @property
    def slow(self) -> bool:
        """Marked slow: the case imports a user's module (torch, a segfault, ``sys.exit``)."""
        return any(getattr(mark, "name", None) == "slow" for mark in self.marks)

    def under(self, command: str) -> "Case":
        """The same case with ``command`` in front of its arguments."""
        return Case(self.id, [command, *self.argv], self.needle, self.seconds, self.megabytes)


def tiers(cases: Sequence[Case]) -> tuple[list, list]:
    """``(in_process, through_the_cli)`` parameters for one table.

    In process: every case that is not itself slow (those import a user's module, which may
    end the interpreter). Through the CLI: every case, all in the slow tier.
    """
    in_process = [c.param() for c in cases if not c.slow]
    cli = [pytest.param(c, id=c.id, marks=(*c.marks, pytest.mark.slow)) for c in cases]
    return in_process, cli


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float


def run_cli(
    argv: Sequence[str], cwd: str, timeout: float = 120.0, env: Optional[dict] = None
) -> Ran:
    """``python -m explorer.cli ARGV``, with its wall time and peak resident memory (see measure.py)."""
    tag = f"{os.getpid()}.{threading.get_ident()}.{time.monotonic_ns()}"
    out_path, err_path, report = (Path(cwd) / f".{name}.{tag}" for name in ("out", "err", "rusage"))
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join([cwd, str(ROOT)]), **(env or {})}
    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                str(MEASURE),
                str(report),
                sys.executable,
                "-m",
                "explorer.cli",
                *argv,
            ],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    seconds = time.monotonic() - start
    measured = (
        json.loads(report.read_text())
        if report.exists()
        else {"returncode": -9, "max_rss_mb": float("nan")}
    )
    ran = Ran(
        measured["returncode"],
        out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
        seconds,
        measured["max_rss_mb"],
    )
    for path in (out_path, err_path, report):
        path.unlink(missing_ok=True)
    return ran


def call_cli(argv: Sequence[str], cwd: str) -> Ran:
    """``explorer.cli.main(ARGV)`` in this interpreter (see ``tests/cli_in_process.py``), timed.

    Memory is not measured in-process (``max_rss_mb`` is NaN): the child form checks it.
    """
    from cli_in_process import call_cli as call

    start = time.monotonic()
    called = call(argv, cwd)
    return Ran(called.returncode, called.stdout, called.stderr, time.monotonic() - start, math.nan)


def assert_bad_input_in_process(case: Case, folder: Path) -> Ran:
    """The contract, asserted on ``explorer.cli.main`` called in-process (the fast tier)."""
    argv = [a.replace("{d}", str(folder)) for a in case.argv]
    ran = call_cli(argv, str(folder))
    _assert_refused(case, ran)
    return ran


def assert_bad_input(case: Case, folder: Path) -> Ran:
    """The contract: exit 2, one line naming the constraint, no traceback, no stdout, bounded."""
    argv = [a.replace("{d}", str(folder)) for a in case.argv]
    ran = run_cli(argv, str(folder), timeout=max(60.0, 4 * case.seconds))
    _assert_refused(case, ran)
    assert ran.max_rss_mb < case.megabytes, (
        f"peak {ran.max_rss_mb:.0f} MB (bound {case.megabytes} MB)"
    )
    return ran


def _assert_refused(case: Case, ran: Ran) -> None:
    lines = ran.stderr.splitlines()
    shown = ran.stderr[-1500:]
    assert ran.returncode == 2, f"exit {ran.returncode}; stderr: {shown}"
    assert len(lines) == 1, f"{len(lines)} lines on stderr: {shown}"
    assert "Traceback" not in ran.stderr
    assert lines[0].startswith("explorer"), lines[0]
    assert case.needle.lower() in lines[0].lower(), f"{case.needle!r} not in {lines[0]!r}"
    assert len(lines[0]) <= 700, f"a {len(lines[0])}-character line: quote a short excerpt"
    assert ran.stdout == "", f"stdout: {ran.stdout[:500]}"
    assert ran.seconds < case.seconds, f"took {ran.seconds:.1f} s (bound {case.seconds} s)"
