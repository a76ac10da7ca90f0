"""What the DeepSpeed tests share besides fixtures: the repository, the 0.8.1 class names, and
the CLI as a user types it.

In a module of its own, not in ``conftest.py``: a test's ``from conftest import ...`` finds
whichever folder's ``conftest`` was imported first as that name, so it failed when these tests
were collected in one run with another folder's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from cli_in_process import run_cli_child

ROOT = Path(__file__).resolve().parents[2]
SEED_CLASS = "seedfix:FixBufferTrainSchedule"
OLD_CLASS = "ds081.runtime.pipe.schedule:TrainSchedule"


def stop_launcher(proc: subprocess.Popen) -> None:
    """End a torchrun launcher: SIGTERM, on which it tears its workers down, then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=60)


def explorer_cli(
    args: list[str], env: dict, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m explorer ARGS`` as a user types it (the suite's one child-CLI runner)."""
    return run_cli_child(args, cwd=cwd, env=env, timeout=timeout)
