"""DeepSpeed 0.8.1's real ``schedule.py`` as an importable package, for ``--from`` sweeps and fixes.

The file is taken from DeepSpeed 0.8.1's source distribution (``make install`` downloads it)
and placed as ``ds081/runtime/pipe/schedule.py``; its one relative import (``..utils``)
resolves to DeepSpeed's own ``call_to_str``. ``seedfix.FixBufferTrainSchedule`` is the seed
thread's class: 0.8.1's ``TrainSchedule`` with only the ``+ 1`` removed from
``num_pipe_buffers``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from deepspeed_081 import write_ds081_package

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ds081_path(tmp_path_factory) -> Path:
    pytest.importorskip("deepspeed.runtime.pipe.schedule", reason="make install provides deepspeed")
    return write_ds081_package(tmp_path_factory.mktemp("ds081"))


@pytest.fixture
def with_ds081(ds081_path, monkeypatch) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ds081_path), os.environ.get("PYTHONPATH", "")]),
    }
    return env
