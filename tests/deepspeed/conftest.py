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
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED_CLASS = "seedfix:FixBufferTrainSchedule"
OLD_CLASS = "ds081.runtime.pipe.schedule:TrainSchedule"


@pytest.fixture(scope="session")
def ds081_env(tmp_path_factory) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix`` (and this worktree)."""
    pytest.importorskip("deepspeed", reason="make install provides deepspeed")
    cache = Path(sys.prefix) / "sdists"
    tarball = cache / "deepspeed-0.8.1.tar.gz"
    if not tarball.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary",
             ":all:", "deepspeed==0.8.1", "-d", str(cache)],
            check=True,
        )  # fmt: skip
    root = tmp_path_factory.mktemp("ds081")
    pipe = root / "ds081" / "runtime" / "pipe"
    pipe.mkdir(parents=True)
    for folder in (root / "ds081", root / "ds081" / "runtime", pipe):
        (folder / "__init__.py").write_text("")
    (root / "ds081" / "runtime" / "utils.py").write_text(
        "from deepspeed.runtime.utils import call_to_str  # noqa: F401\n"
    )
    with tarfile.open(tarball) as tf:
        source = tf.extractfile("deepspeed-0.8.1/deepspeed/runtime/pipe/schedule.py").read()
    (pipe / "schedule.py").write_bytes(source)
    (root / "seedfix.py").write_text(
        "from ds081.runtime.pipe.schedule import TrainSchedule\n\n\n"
        "class FixBufferTrainSchedule(TrainSchedule):\n"
        "    def num_pipe_buffers(self):\n"
        "        return max(2, min(self.stages - self.stage_id, self.micro_batches))\n"
    )
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
