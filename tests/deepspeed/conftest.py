"""DeepSpeed 0.8.1's real ``schedule.py`` as importable classes, for runs on today's engine.

0.8.1 cannot be installed beside torch 2.9, but its ``schedule.py`` only needs ``call_to_str``:
it is taken from the source distribution (``make install`` downloads it) as package ``ds081``.
``seedfix.FixBufferTrainSchedule`` is the seed thread's class: 0.8.1's ``TrainSchedule`` with
only the ``+ 1`` removed from ``num_pipe_buffers`` (so the old send/recv order stays).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from deepspeed_081 import write_ds081_package

ROOT = Path(__file__).resolve().parents[2]
SEED_CLASS = "seedfix:FixBufferTrainSchedule"
OLD_CLASS = "ds081.runtime.pipe.schedule:TrainSchedule"


@pytest.fixture(scope="session")
def ds081_env(tmp_path_factory) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix`` (and this worktree)."""
    pytest.importorskip("deepspeed", reason="make install provides deepspeed")
    root = write_ds081_package(tmp_path_factory.mktemp("ds081"))
    path = [str(root), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def explorer_cli(
    args: list[str], env: dict, cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """``python -m explorer ARGS`` as a user types it."""
    return subprocess.run(
        [sys.executable, "-m", "explorer", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
