"""The bad-input contract every command's table asserts, in two tiers.

Every bad invocation must end with exit 2, exactly one line on stderr that names the
constraint (``needle``), no traceback, nothing on stdout, within a time bound and (measured
with ``wait4``) a memory bound.

Each table is asserted in two tiers. In the fast tier, :func:`assert_bad_input_in_process`
calls ``explorer.cli.main`` in the test's own interpreter: the same exit code, the same one
line, no traceback, no stdout, the time bound, and the memory bound on what the refusal
allocated (``tracemalloc``'s peak). What only shows in a fresh interpreter (the process's real
exit, its resident memory, a stray import at start-up) is the same for every refusal of a
command, since all are refused by the same edge, so the slow tier runs :func:`assert_bad_input`
through ``python -m explorer.cli`` in a child on one case of each table and on every case that
cannot run in process (those import a user's module, which may end the interpreter);
``test_refusals_stay_light`` checks the start-up imports. :func:`tiers` makes the two lists.
"""

from __future__ import annotations

import json
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

#: Default bounds for one bad invocation (seconds of the command's own CPU time, peak MB):
#: refused at the edge, so cheap and small.
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
    end the interpreter). Through the CLI, all in the slow tier: every slow case, and the
    table's first in-process case, the child that proves the real interpreter's contract for
    the refusals the fast tier runs (see the module docstring).
    """
    fast = [c for c in cases if not c.slow]
    in_process = [c.param() for c in fast]
    first = fast[0] if fast else None
    child = [c for c in cases if c.slow or c is first]
    cli = [pytest.param(c, id=c.id, marks=(*c.marks, pytest.mark.slow)) for c in child]
    return in_process, cli


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float
    #: The command's own CPU time (user + system): what the bounds hold, since other processes on
    #: a busy machine stretch wall time but not this.
    cpu_seconds: float


def run_cli(
    argv: Sequence[str], cwd: str, timeout: float = 120.0, env: Optional[dict] = None
) -> Ran:
    """``python -m explorer.cli ARGV``, with its wall time, CPU time and peak resident memory (see measure.py)."""
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
        else {"returncode": -9, "max_rss_mb": float("nan"), "cpu_s": float("nan")}
    )
    ran = Ran(
        measured["returncode"],
        out_path.read_text(errors="replace"),
        err_path.read_text(errors="replace"),
        seconds,
        measured["max_rss_mb"],
        measured["cpu_s"],
    )
    for path in (out_path, err_path, report):
        path.unlink(missing_ok=True)
    return ran


def call_cli(argv: Sequence[str], cwd: str) -> Ran:
    """``explorer.cli.main(ARGV)`` in this interpreter (see ``tests/cli_in_process.py``), timed.

    ``max_rss_mb`` is the peak of what the call allocated (``tracemalloc``), not the
    interpreter's resident size, which holds everything earlier tests loaded.
    """
    import tracemalloc

    from cli_in_process import call_cli as call

    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    start, cpu = time.monotonic(), time.process_time()
    try:
        called = call(argv, cwd)
        seconds, cpu = time.monotonic() - start, time.process_time() - cpu
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        if not tracing:
            tracemalloc.stop()
    return Ran(called.returncode, called.stdout, called.stderr, seconds, peak / 2**20, cpu)


def assert_bad_input_in_process(case: Case, folder: Path) -> Ran:
    """The contract, asserted on ``explorer.cli.main`` called in-process (the fast tier)."""
    argv = [a.replace("{d}", str(folder)) for a in case.argv]
    ran = call_cli(argv, str(folder))
    _assert_refused(case, ran)
    assert ran.max_rss_mb < case.megabytes, (
        f"allocated {ran.max_rss_mb:.0f} MB at peak (bound {case.megabytes} MB)"
    )
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
    assert ran.cpu_seconds < case.seconds, (
        f"took {ran.cpu_seconds:.1f} s of CPU (bound {case.seconds} s; {ran.seconds:.1f} s of wall time)"
    )
