"""Every P2P message checked against its pair, on real gloo runs of the explorer's engine.

Two of the issue's failures, reproduced by running the job:

- the same-peer swap at pipeline size 2 (Megatron-LM #5271): interleaved 1F1B on 2 ranks, with
  stage 1 running its backward of micro-batch 0 before its forward of micro-batch 2 (an eager
  backward, as zero-bubble schedules do). Tagged, that order is harmless (the run is bitwise
  equal to the reference); untagged, rank 1's first receive from rank 0 meets the activation
  sent for micro-batch 2 instead of the gradient, and training goes on silently with it;
- a pooled receive buffer that no longer fits (DeepSpeed #5729's class): a transformer fed
  unpadded batches of sequence lengths 8 and 6, on a receiver that sizes its buffer once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.runtime.launch import run_pipeline
from explorer.pipeline.runtime.spec import ModelSpec, RunSpec
from explorer.pipeline.schedules.schedule import Schedule, from_streams


def eager_backward() -> Schedule:
    """Interleaved 1F1B on 2 ranks, stage 1's backward of micro-batch 0 moved before its forward
    of micro-batch 2 (steps 7 and 8 of rank 1 swapped)."""
    base = build("interleaved-1f1b", 2, 4, chunks=2)
    streams = [list(map(list, base.stream(r))) for r in range(base.num_ranks)]
    assert [str(i) for i in streams[1][7]][0] == "1RA2b2" and str(streams[1][8][0]) == "1RG0b0"
    streams[1][7], streams[1][8] = streams[1][8], streams[1][7]
    return from_streams(
        streams,
        num_microbatches=4,
        stage_to_rank=base.stage_to_rank,
        buffers=base.buffers,
        name="interleaved-1f1b, eager backward",
        params=base.params,
    )


@pytest.mark.slow
def test_the_same_peer_swap_at_pipeline_size_2_is_caught_where_the_receive_met_it(
    tmp_path, swap_run
):
    schedule = eager_backward()
    assert check(schedule).findings.deadlocks["batched"] is None  # the analysis finds it runnable
    tagged = run_pipeline(RunSpec.for_schedule(schedule), tmp_path / "tagged", timeout_s=120)
    assert tagged.ok and tagged.bitwise_equal_to_reference is True
    assert tagged.details["contract"] == []
    assert any(r.get("p2p") for r in tagged.records)  # every exchange recorded what it carried

    untagged = swap_run  # the same schedule untagged: run once for the suite (conftest.py)
    # Nothing crashed: the swapped tensors have the same shape; only the contract says so.
    assert untagged.bitwise_equal_to_reference is False and not untagged.ok
    first = untagged.details["contract"][0]
    assert (first["kind"], first["stage"], first["step"], first["microbatch"]) == (
        "swap",
        1,
        7,
        0,
    )
    assert (first["send_stage"], first["send_step"], first["instruction"]) == (
        0,
        4,
        "RecvGrad(buffer_id=0)",
    )
    assert first["sent"] == ["float32[4,32]*"] and first["received"] == ["float32[4,32]"]
    failure = untagged.failure
    assert failure is not None and failure.kind == "contract"
    assert (failure.rank, failure.stage, failure.step) == (1, 1, 7)
    assert "stage 0 -> 1, micro-batch 2: its activation" in failure.message
    assert "untagged messages pair first in, first out" in failure.message
    _read_back(shutil.copytree(untagged.folder, tmp_path / "untagged"))


def _read_back(folder: Path) -> None:
    """``explorer read`` gives the same finding (text and JSON); a damaged message is exit 2."""
    text = _cli("read", str(folder))
    assert text.returncode == 1 and text.stdout.startswith("failed: P2P contract (swap) at stage 1")
    doc = json.loads(_cli("read", str(folder), "--json").stdout)
    assert doc["contract"][0]["kind"] == "swap" and doc["failure"]["kind"] == "contract"
    path = folder / "rank1.jsonl"
    lines = path.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if '"p2p"' in line)
    lines[at] = lines[at].replace("[4,32]", "[4,32", 1)  # a truncated shape
    path.write_text("\n".join(lines) + "\n")
    bad = _cli("read", str(folder))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert f"rank1.jsonl line {at + 1}" in bad.stderr and "'p2p' element" in bad.stderr


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize("pooled", [True, False], ids=["pooled", "fresh"])
def test_a_receive_buffer_sized_for_another_micro_batch_is_caught_before_the_crash(
    tmp_path, pooled
):
    schedule = build("1f1b", 2, 4)
    spec = RunSpec.for_schedule(
        schedule,
        model=ModelSpec("transformer", {"seqs": [8, 6]}),
        recv_pool=pooled,
        stall_timeout_s=30,
    )
    result = run_pipeline(spec, tmp_path, timeout_s=120)
    first = result.details["contract"][0]
    kind = "reuse" if pooled else "shape"
    assert (first["kind"], first["stage"], first["step"], first["microbatch"], first["index"]) == (
        kind,
        1,
        3,
        1,
        0,
    )
    assert first["sent"] == ["float32[4,6,32]*"] and first["received"] == ["float32[4,8,32]*"]
    assert first["reused_from"] == ([0, 1] if pooled else None)
    failure = result.failure
    assert (
        failure is not None
        and failure.kind == "contract"
        and (failure.stage, failure.step)
        == (
            1,
            3,
        )
    )
    words = "stage 0 -> 1, micro-batch 1, tuple[0]: sent float32[4,6,32]; the receive buffer is float32[4,8,32]"
    assert words in failure.message
    if pooled:
        assert "reused from the activation received at step 1" in failure.message
    assert "dynamic_shape" in failure.message  # the fix
    # What happened next (the last stage's loss on 32 rows for 24 targets) follows the cause.
    assert "then: ValueError" in failure.message


@pytest.mark.slow
def test_explorer_run_untagged_finds_dualpipevs_swap_on_4_ranks(tmp_path):
    """DualPipeV puts stages 0 and 7 on rank 0, 1 and 6 on rank 1: untagged, the activations of
    stage 0 and the gradients of stage 7 share one channel, and the two ranks order them apart."""
    out = _cli(
        "run", "--kind", "dualpipev", "--stages", "4", "--microbatches", "8", "--untagged",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    assert out.stdout.startswith("failed: P2P contract (swap) at stage 6 step 9 (RecvGrad(")
    assert "ranks 0 and 1 are each other's next and previous rank" in out.stdout


def test_the_message_options_belong_to_the_explorers_engine(explorer_cli):
    out = explorer_cli(
        "run", "--kind", "1f1b", "--stages", "2", "--microbatches", "2", "--untagged",
        "--engine", "deepspeed",
    )  # fmt: skip
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "--untagged changes how the explorer's engine exchanges messages" in out.stderr
