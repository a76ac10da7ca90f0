"""DeepSpeed 0.8.1's real ``schedule.py`` as importable classes, for runs on today's engine.

0.8.1 cannot be installed beside torch 2.9, but its ``schedule.py`` only needs ``call_to_str``:
it is taken from the source distribution (``make install`` downloads it) as package ``ds081``.
``seedfix.FixBufferTrainSchedule`` is the seed thread's class: 0.8.1's ``TrainSchedule`` with
only the ``+ 1`` removed from ``num_pipe_buffers`` (so the old send/recv order stays).
"""

from __future__ import annotations

import os

import pytest
from deepspeed_081 import write_ds081_package
from deepspeed_runs import ROOT


@pytest.fixture(scope="session")
def ds081_env(tmp_path_factory) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix`` (and this worktree)."""
    pytest.importorskip("deepspeed", reason="make install provides deepspeed")
    root = write_ds081_package(tmp_path_factory.mktemp("ds081"))
    path = [str(root), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
