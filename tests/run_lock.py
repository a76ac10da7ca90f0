"""A stand-in for a run's launcher: it holds the folder's ``run.lock`` as the real one does.

Whether a run goes on is read from that lock (the kernel's list of held locks), so a test that
needs a live run without racing one takes the lock itself, on a copy of a real run's folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

#: Holds the folder's lock as the launcher does, says so, lets it go on "release", then waits.
_STAND_IN = """
import fcntl, os, sys
fh = open(sys.argv[1] + "/run.lock", "a+")
fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
fh.seek(0); fh.truncate(); fh.write(f"run {sys.argv[2]}, pid {os.getpid()}"); fh.flush()
print("held", flush=True)
sys.stdin.readline()
fcntl.flock(fh, fcntl.LOCK_UN)
print("released", flush=True)
sys.stdin.readline()
"""


class StandIn:
    """A process that holds ``run.lock`` for a run id, under a command line naming explorer
    (as a notebook kernel that launched a run lives on after it)."""

    def __init__(self, folder: Path, run_id: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _STAND_IN, str(folder), run_id, "explorer", "run"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "held"

    def release(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "released"

    def end(self) -> None:
        self.proc.kill()
        self.proc.wait()
