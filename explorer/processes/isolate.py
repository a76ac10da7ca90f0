"""Run a user's code in a child process with a timeout, so it cannot take the CLI down with it.

A ``--from`` class or a ``--step`` function is arbitrary code: it may call ``sys.exit(3)``,
raise ``KeyboardInterrupt``, crash the interpreter with a segfault, or sleep forever. In the
CLI's own process each of those ends the command without a word (or hangs it). In a child,
each is an ending the parent can name: an exit code, a signal, a timeout. The child runs under
the one supervisor (:mod:`explorer.processes`): in its own process group, killed with
the whole group, so nothing is left behind.
"""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence

from explorer.errors import one_line
from explorer.processes import Child, Engine, Report, supervise

#: Exit code a child uses for "bad input, message on the last stderr line" (the CLI's own code).
INPUT_ERROR = 2
#: Prefix of the child's stderr line that carries an input error's message.
MARKER = "explorer-input-error: "


@dataclass(frozen=True)
class Outcome:
    """How a child ended: its code (negative: killed by a signal), its output, and whether it timed out."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    seconds: float

    @property
    def signal(self) -> Optional[str]:
        """``SIGSEGV`` for a child killed by signal 11; None otherwise."""
        if self.returncode >= 0 or self.timed_out:
            return None
        try:
            return signal.Signals(-self.returncode).name
        except ValueError:
            return f"signal {-self.returncode}"

    @property
    def input_error(self) -> Optional[str]:
        """The message of an input error the child reported, if it reported one."""
        if self.returncode != INPUT_ERROR:
            return None
        for line in reversed(self.stderr.splitlines()):
            if line.startswith(MARKER):
                return line[len(MARKER) :]
        return None

    def ending(self, what: str, timeout_s: float) -> str:
        """One sentence on an ending other than success or a reported input error."""
        if self.timed_out:
            return (
                f"{what} did not finish within {timeout_s:g} s and was stopped (it runs in a child process; "
                "give --timeout SECONDS to allow longer)"
            )
        if self.signal:
            hint = " (out of memory?)" if self.signal == "SIGKILL" else ""
            return f"{what} crashed the child process that ran it: killed by {self.signal}{hint}"
        if self.returncode == 130:
            return f"{what} was interrupted: KeyboardInterrupt was raised in the user's code (the child exited 130)"
        last = next(
            (line.strip() for line in reversed(self.stderr.splitlines()) if line.strip()), ""
        )
        said = f"; its last words: {last[:160]!r}" if last else ""
        return (
            f"{what} ended the child process that ran it with exit code {self.returncode} "
            f"(sys.exit or os._exit in the user's code?){said}"
        )


class _OneChild(Engine):
    """``argv`` as the supervisor's only child: its stdout kept line for line (or passed through)."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log: Path, keep: bool) -> None:
        self.argv, self.env, self.log, self.keep = argv, env, log, keep
        self.lines: list[str] = []

    def children(self) -> list[Child]:
        return [Child(0, self.argv, self.env, self.log, pipe_stdout=True)]

    def read_line(self, rank: int, line: str) -> Optional[Report]:
        if self.keep:
            self.lines.append(line)
        else:
            sys.stdout.write(line)
            sys.stdout.flush()
        return None


def run_child(
    argv: Sequence[str],
    timeout_s: float,
    *,
    env: Optional[dict] = None,
    capture_stdout: bool = True,
) -> Outcome:
    """Run ``argv`` under the supervisor, in its own process group, killed after ``timeout_s`` seconds.

    stdout is captured (or passed on to the parent's as it comes, with ``capture_stdout=False``);
    stderr is always captured, so the caller decides what reaches the user.
    """
    with tempfile.TemporaryDirectory(prefix="explorer-child-") as folder:
        log = Path(folder) / "stderr.txt"
        engine = _OneChild(argv, env if env is not None else dict(os.environ), log, capture_stdout)
        out = supervise(engine, timeout_s=timeout_s)
        stderr = log.read_text(encoding="utf-8", errors="replace")
    return Outcome(
        out.returncodes[0], "".join(engine.lines), stderr, out.ending == "timeout", out.seconds
    )


def refuse(said: str) -> int:
    """Child side: say why the user's input cannot be used, where :func:`run_child` reads it
    (stderr, after :data:`MARKER`, one line), and return the exit code that means bad input."""
    print(MARKER + one_line(said), file=sys.stderr)
    return 2


def raised(exc: BaseException) -> str:
    """What the user's code raised, short: its type and the start of its message."""
    return f"{type(exc).__name__} ({str(exc)[:200]})"


__all__ = ["INPUT_ERROR", "MARKER", "Outcome", "raised", "refuse", "run_child"]
