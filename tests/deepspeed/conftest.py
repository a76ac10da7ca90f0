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

import pytest
from built_once import built_once
from deepspeed_081 import write_ds081_package
from deepspeed_runs import ROOT


@pytest.fixture(scope="session")
def ds081_env(tmp_path_factory) -> dict:
    """An environment whose PYTHONPATH finds ``ds081`` and ``seedfix`` (and this worktree)."""
    pytest.importorskip("deepspeed", reason="make install provides deepspeed")
    root = write_ds081_package(tmp_path_factory.mktemp("ds081"))
    path = [str(root), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


@pytest.fixture(scope="session")
def float_mask_job(tmp_path_factory) -> tuple[subprocess.CompletedProcess, object]:
    """DeepSpeed #5518's job (``deepspeed_user_job.py --float-mask``, 2 ranks under torchrun,
    ``explorer.instrument`` tracing): ``(torchrun's process, the trace folder)``, made once per
    test run for the tests that read that folder (``explorer read``, ``explorer check``)."""

    def launch():
        out = tmp_path_factory.mktemp("float-mask") / "trace"
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        job = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
             str(ROOT / "tests" / "data" / "deepspeed_user_job.py"), "--out", str(out),
             "--float-mask", "--iterations", "1"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return job, out

    return built_once(tmp_path_factory, "deepspeed-float-mask-job", launch)
