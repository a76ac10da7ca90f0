"""``explorer.instrument(engine, out_dir)`` in a user's own DeepSpeed script, read back by ``explorer read``.

The script (``tests/data/deepspeed_user_job.py``) is started by torchrun from the test, 4 ranks
of DeepSpeed 0.19.8's real engine on gloo, exactly as a user starts it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deepspeed_runs import ROOT, explorer_cli

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "tests" / "data" / "deepspeed_user_job.py"


def torchrun(out: Path, *args: str, env: dict, background: bool = False):
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
        str(SCRIPT), "--out", str(out), *args,
    ]  # fmt: skip
    if background:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def env() -> dict:
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def test_a_traced_job_is_read_back_with_every_instruction_and_no_finding(tmp_path, env):
    job = torchrun(tmp_path / "trace", "--iterations", "2", env=env)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    done = explorer_cli(["read", str(tmp_path / "trace"), "--json"], env, tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    doc = json.loads(done.stdout)
    assert doc["kind"] == "pipeline" and doc["ok"] is True and doc["finished"] is True
    assert doc["deepspeed_version"] == "0.19.8" and doc["failure"] is None
    assert [r["state"] for r in doc["ranks"]] == ["done"] * 4
    assert doc["findings"] == [] and doc["schedule"]["stages"] == 4
    assert doc["schedule"]["microbatches"] == 8
    rows = doc["instructions"]
    for key in ("rank", "stage", "step", "iteration", "instruction", "buffer", "start", "end"):
        assert all(key in r for r in rows), key
    # two iterations of today's TrainSchedule: 22 steps, 8 forwards and backwards per stage each
    assert {r["iteration"] for r in rows} == {0, 1}
    for stage in range(4):
        fwd = [
            r for r in rows if r["stage"] == stage and r["instruction"].startswith("ForwardPass")
        ]
        assert len(fwd) == 16 and sorted({r["microbatch"] for r in fwd}) == list(range(8))
    assert max(r["step"] for r in rows) == 21
    # Every send and receive described its tuple, and each matched its pair: a clean contract.
    p2p = [r for r in rows if r["instruction"].startswith(("Send", "Recv"))]
    assert p2p and all(r["p2p"] == ["float32[4,32]" + "*" * r["instruction"].startswith(
        ("SendActivation", "RecvActivation"))] for r in p2p)  # fmt: skip
    assert doc["contract"] == []


def test_a_job_with_the_seeds_order_is_read_back_with_deepspeeds_failure_and_the_finding(
    tmp_path, env
):
    job = torchrun(tmp_path / "trace", "--legacy-order", env=env)
    assert job.returncode != 0  # the job fails as it would without the explorer
    done = explorer_cli(["read", str(tmp_path / "trace"), "--json"], env, tmp_path)
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    f = doc["failure"]
    assert (f["rank"], f["stage"], f["step"], f["instruction"]) == (
        2,
        2,
        6,
        "SendGrad(buffer_id=0)",
    )
    assert f["exception_type"] == "AssertionError"
    assert "_exec_send_grads" in f["traceback_tail"].splitlines()[-1]
    # every other rank that wrote its failure (its lost peer) is a consequence, and only those:
    # how many wrote one before torchrun's SIGTERM reached them is the teardown's race
    assert all(c.startswith(("rank 0 (+", "rank 1 (+", "rank 3 (+")) for c in f["consequences"])
    said = {int(c.split()[1]) for c in f["consequences"]}
    assert said == {r["rank"] for r in doc["ranks"] if r["state"] == "failed"} - {2}
    hazards = [x for x in doc["findings"] if x["type"] == "hazard"]
    first = min(hazards, key=lambda h: (h["step"], h["stage"]))
    assert (first["stage"], first["step"], first["instruction"]) == (2, 6, "SendGrad(buffer_id=0)")
    text = explorer_cli(["read", str(tmp_path / "trace")], env, tmp_path).stdout
    assert "first failure: rank 2, stage 2, step 6" in text
    assert "step 6: 2RA2b0 2SG0b0 2F2b0  <-- HAZARD" in text
    # after the job, no rank is "running": torchrun killed the ones that wrote no end
    assert doc["state"] == "failed" and doc["ranks"][2]["state"] == "failed"
    assert {r["state"] for r in doc["ranks"]} <= {"failed", "stopped"}, doc["ranks"]
    assert "running" not in text.split("first failure")[0] and "; failed)" in text


def test_a_job_started_by_the_deepspeed_launcher_is_read_back(tmp_path, env):
    """The launcher is the claim, not the size: 2 ranks (2 stages) are enough, and the 4-rank
    job is read back above."""
    launcher = Path(sys.executable).with_name("deepspeed")
    job = subprocess.run(
        [str(launcher), "--num_gpus", "2", str(SCRIPT), "--iterations", "2", "--out",
         str(tmp_path / "trace")],
        env={**env, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    done = explorer_cli(["read", str(tmp_path / "trace"), "--json"], env, tmp_path)
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["ok"] is True and doc["findings"] == []
    assert [r["state"] for r in doc["ranks"]] == ["done"] * 2 and doc["schedule"]["stages"] == 2
    # no torchrun job id here: rank 0's id, broadcast, names every line of every rank
    assert doc["run"] and {r["run"] for r in doc["instructions"]} == {doc["run"]}
