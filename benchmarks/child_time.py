"""One timed child process, as the scale benchmarks measure a reader: its output, wall, CPU, memory.

``wait4`` gives the child's own rusage (CPU of it and of the workers it waited for, its largest
process), which ``subprocess.run`` does not; stdout goes to a temporary file, not a pipe, so a
reader printing megabytes is not slowed by this process reading them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Optional


def timed(cmd: list[str], env: dict, cwd: Optional[Path] = None) -> tuple[str, float, float, float]:
    """``cmd``'s stdout, wall seconds, CPU seconds (it and its children), largest process MB;
    exits the benchmark when ``cmd`` ends other than 0 or 1 (the readers' verdicts)."""
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode()
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(cmd[:5])} failed ({code})")
    return text, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024
