"""``explorer check`` on the folder ``explorer.instrument`` wrote in a real DeepSpeed job.

The job is DeepSpeed #5518's (a float mask that needs no gradient in stage 0's tuple, 2 stages,
gloo): ``check`` gives the same first violation as ``explorer read`` and exits 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from deepspeed_runs import ROOT

pytestmark = pytest.mark.slow


def test_check_on_an_instrumented_job_names_the_gradient_count_mismatch(float_mask_job):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    job, out = float_mask_job  # torchrun ... deepspeed_user_job.py --float-mask (conftest.py)
    assert job.returncode != 0, job.stdout[-2000:]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "explorer.cli", *args, str(out), "--json"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip

    check = cli("check")
    assert check.returncode == 1, check.stderr
    doc = json.loads(check.stdout)
    assert doc["source"] == "explorer.instrument's trace" and not doc["ok"]
    first = doc["contract"][0]
    assert (first["kind"], first["stage"], first["step"]) == ("count", 0, 3)
    assert doc["contract"] == json.loads(cli("read").stdout)["contract"]
