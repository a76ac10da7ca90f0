"""DeepSpeed 0.19.8's buffer pool still ignores dtype: an int64 tensor in a 3-stage tuple, caught.

``PipelineEngine._allocate_or_extend_buffers`` keeps one pool (``_grad_layer_buf``) for the
received activations and the received gradients, and reuses slot ``i`` whenever it holds at
least as many elements, whatever its dtype. With a stage tuple ``(int64 ids, float32 x)`` the
middle stage's first activation fills slot 0 with the ids; its gradient buffer for ``x`` is
then slot 0 again, an int64 view: the float32 gradient lands in it byte for byte (gloo fills the
head of the larger buffer without a word), and training goes on with garbage gradients. The job
itself reports nothing; the contract says where, from what the ranks recorded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from deepspeed_runs import ROOT

pytestmark = pytest.mark.slow

SCRIPT = ROOT / "tests" / "data" / "deepspeed_user_job.py"


def test_an_int64_tensor_in_a_3_stage_tuple_lands_in_a_reused_buffer_and_is_caught(tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out, gate = tmp_path / "trace", tmp_path / "gate"
    gate.mkdir()
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "3",
         str(SCRIPT), "--out", str(out), "--ids-tuple", "--iterations", "2", "--gate", str(gate)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        _followed_live(out, gate, proc)
    finally:
        for i in range(2):
            (gate / f"iteration-{i}").touch()
        output = proc.communicate(timeout=300)[0]
    job = subprocess.CompletedProcess(proc.args, proc.returncode, output, output)
    assert job.returncode == 0, job.stderr[-2000:]  # DeepSpeed itself says nothing
    read = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "read", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 1, read.stderr
    doc = json.loads(read.stdout)
    first = doc["contract"][0]
    assert (first["kind"], first["stage"], first["step"], first["instruction"]) == (
        "reuse",
        1,
        4,
        "RecvGrad(buffer_id=0)",
    )
    assert first["sent"] == ["float32[4,32]"] and first["received"] == ["int64[4,32]"]
    assert first["reused_from"] == [0, 1] and first["send_stage"] == 2
    assert "reused from the activation received at step 1" in first["message"]
    assert "_allocate_or_extend_buffers" in first["hint"]
    # Every gradient the middle stage received, both iterations, and nothing else.
    assert {(v["stage"], v["instruction"][:8]) for v in doc["contract"]} == {(1, "RecvGrad")}
    assert len(doc["contract"]) == 2 * 8
    assert doc["findings"][-1]["type"] == "contract"
    text = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "read", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert text.returncode == 1
    assert "16 message(s) broke the P2P contract; the first:" in text.stdout
    assert "the receive buffer is int64[4,32], reused from the activation" in text.stdout


def _followed_live(out, gate, proc) -> None:
    """While every rank waits at the gate after iteration 0, the live follower says it and pins
    it on the grid where the receive met the message (the job is still running)."""
    import time

    from explorer.pipeline.app.job_follower import JobFollower

    follower = JobFollower(out, job=proc)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not (
        follower.history
        and follower.history[-1]["iteration"] == 0
        and follower.run.finished is False
        and all(r["last_step"] == 19 for r in follower.run.ranks())
    ):
        follower.poll()
        assert proc.poll() is None, proc.stdout.read()[-2000:] if proc.stdout else ""
        time.sleep(0.1)
    assert proc.poll() is None  # held at the gate: the job is running
    assert len(follower.contract) == 8 and follower.history[-1]["contract"] == 8
    assert follower.history[-1]["failure_cell"] == (1, 4)
    assert "8 message(s) broke the P2P contract" in follower.status.value
    assert "reused from the activation received at step 1" in follower.status.value


def test_a_float_tensor_without_gradient_in_the_tuple_is_a_gradient_count_mismatch(float_mask_job):
    """DeepSpeed #5518: stage 0 sends ``(x, mask)``, the mask a float tensor that needs no
    gradient; stage 1 receives both as requiring one (the engine sets ``requires_grad`` on every
    floating tensor it receives) and sends two gradients back for a tuple with one. The job then
    fails in stage 0's backward; the contract names the cause at the receive before it."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    job, out = float_mask_job  # torchrun ... deepspeed_user_job.py --float-mask (conftest.py)
    assert job.returncode != 0
    read = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "read", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 1, read.stderr
    doc = json.loads(read.stdout)
    first = doc["contract"][0]
    assert (first["kind"], first["stage"], first["step"], first["microbatch"]) == (
        "count",
        0,
        3,
        0,
    )
    assert first["sent"] == ["float32[4,32]", "float32[4,32]"]
    assert "sent 2 gradient(s)" in first["message"]
    assert (
        "1 element(s) requiring one (float32[4,32]*, float32[4,32]; * marks them)"
        in (first["message"])
    )
    assert "integer or bool tensor" in first["hint"]
    # DeepSpeed's own failure comes after, in the backward of the stage that received them.
    failure = doc["failure"]
    assert (failure["stage"], failure["instruction"]) == (0, "BackwardPass(buffer_id=0)")
    assert failure["step"] >= first["step"]


def test_changing_lengths_without_dynamic_shape_land_in_a_buffer_sized_for_the_first(tmp_path):
    """DeepSpeed #5729: odd micro-batches are one row shorter, unpadded, and the engine was not
    told (``dynamic_shape``): stage 1 receives micro-batch 1's 3 rows into the 4-row buffer it
    sized from micro-batch 0, computes on a stale row, and fails later in the loss."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    out = tmp_path / "trace"
    job = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(SCRIPT), "--out", str(out), "--varlen", "--iterations", "1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert job.returncode != 0
    read = subprocess.run(
        [sys.executable, "-m", "explorer.cli", "read", str(out), "--json"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 1, read.stderr
    doc = json.loads(read.stdout)
    first = doc["contract"][0]
    assert (first["kind"], first["stage"], first["step"], first["microbatch"]) == (
        "reuse",
        1,
        3,
        1,
    )
    assert first["sent"] == ["float32[3,32]*"] and first["received"] == ["float32[4,32]*"]
    assert first["reused_from"] == [0, 1] and "dynamic_shape=True" in first["hint"]
    assert doc["failure"]["stage"] == 1 and doc["failure"]["step"] >= first["step"]
