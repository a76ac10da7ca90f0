"""DeepSpeed 0.8.1's real ``schedule.py`` as an importable package, for ``--from`` sweeps and fixes.

The file is taken from DeepSpeed 0.8.1's source distribution (``make install`` downloads it)
and placed as ``ds081/runtime/pipe/schedule.py``; its one relative import (``..utils``)
resolves to DeepSpeed's own ``call_to_str``. ``seedfix.FixBufferTrainSchedule`` is the seed
thread's class: 0.8.1's ``TrainSchedule`` with only the ``+ 1`` removed from
``num_pipe_buffers``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ds081_path(tmp_path_factory) -> Path:
    pytest.importorskip("deepspeed.runtime.pipe.schedule", reason="make install provides deepspeed")
    cache = ROOT / ".venv" / "sdists"
    tarball = cache / "deepspeed-0.8.1.tar.gz"
    if not tarball.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                "deepspeed==0.8.1",
                "-d",
                str(cache),
            ],
            check=True,
        )
    root = tmp_path_factory.mktemp("ds081")
    pipe = root / "ds081" / "runtime" / "pipe"
    pipe.mkdir(parents=True)
    for folder in (root / "ds081", root / "ds081" / "runtime", pipe):
        (folder / "__init__.py").write_text("")
    (root / "ds081" / "runtime" / "utils.py").write_text(
        "from deepspeed.runtime.utils import call_to_str  # noqa: F401\n"
    )
    with tarfile.open(tarball) as tf:
        (pipe / "schedule.py").write_bytes(
            tf.extractfile("deepspeed-0.8.1/deepspeed/runtime/pipe/schedule.py").read()
        )
    (root / "seedfix.py").write_text(
        "from ds081.runtime.pipe.schedule import TrainSchedule\n\n\n"
        "class FixBufferTrainSchedule(TrainSchedule):\n"
        "    def num_pipe_buffers(self):\n"
        "        return max(2, min(self.stages - self.stage_id, self.micro_batches))\n"
    )
    return root


@pytest.fixture
def with_ds081(ds081_path, monkeypatch) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ds081_path), os.environ.get("PYTHONPATH", "")]),
    }
    return env
