"""Turn a child that died into a :class:`Failure` with the one line that explains it.

torch_xla aborts the whole process on internal errors (``F0000 ... Check failed: has_layout()``
then SIGABRT), so the parent only has the exit status and stderr. The fatal line is the
first glog ``F`` line or ``Check failed``; a Python exception's last line otherwise; the
signal name when stderr says nothing.
"""

from __future__ import annotations

import re
from typing import Optional

from explorer.failure import Failure, FailureKind, signal_name, tail

__all__ = ["fatal_line", "from_exit", "signal_name", "tail"]

_GLOG_FATAL = re.compile(r"^F\d{4} [\d:. ]+\s*\d+\s+([\w./-]+:\d+)\]\s*(.*)$")
_MARKERS = (
    "Check failed",
    "terminate called",
    "Fatal Python error",
    "Aborted",
    "RuntimeError:",
    "INTERNAL:",
    "UNAVAILABLE:",
    "DEADLINE_EXCEEDED",
)


def fatal_line(stderr: str) -> str:
    """The line of ``stderr`` that says why the process died ('' when none stands out)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        m = _GLOG_FATAL.match(line)
        if m:
            return f"{m.group(2)} ({m.group(1)})"
    for marker in _MARKERS:
        for line in lines:
            if marker in line:
                return line
    return ""


def from_exit(returncode: Optional[int], stderr: str, step: Optional[int]) -> Failure:
    """A failure for a child that exited without reporting a result."""
    sig = signal_name(returncode)
    line = fatal_line(stderr)
    kind = (
        FailureKind.ABORT if sig in ("SIGABRT", "SIGSEGV", "SIGBUS", "SIGILL") else FailureKind.EXIT
    )
    if not line:
        line = (
            f"the XLA child process was killed by {sig}"
            if sig
            else f"the XLA child process exited with status {returncode}"
        )
        if sig == "SIGKILL":
            line += " (out of memory? keep the model small)"
    where = f" during step {step}" if step is not None else " during setup"
    return Failure(
        kind=kind,
        message=line + where,
        step=step,
        returncode=returncode,
        signal=sig,
        traceback_tail=tail(stderr),
    )
