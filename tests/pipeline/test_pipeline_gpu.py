"""The real pipeline on CUDA: NCCL with one GPU per rank, and one GPU shared by ranks over gloo.

These are the paths ``explorer run --backend nccl`` and ``explorer run --backend gloo --device
cuda`` take on a GPU machine, run through the CLI as a user runs them. They need a CUDA device
(``gpu``: ``tests/conftest.py`` skips them only where torch sees none) and start one process
per rank (``slow``). Losses are compared with the CPU reference within float tolerance, not
bit for bit: CUDA kernels round differently from CPU ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_in_process import run_cli_child

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

SEED = ["--kind", "deepspeed-train", "--buffers", "fixed", "--order", "legacy"]
FIXED = ["--kind", "deepspeed-train", "--buffers", "fixed", "--order", "fixed"]


def _run(folder: Path, *args: str):
    return run_cli_child(["run", *args, "--out", str(folder), "--json"], timeout=600)


def _starts(folder: Path) -> list[dict]:
    """Each rank's ``start`` line: the device and backend it really ran on."""
    lines = [
        json.loads(line)
        for path in sorted(folder.glob("rank*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
    return sorted((x for x in lines if x.get("type") == "start"), key=lambda x: x["rank"])


def _assert_trained_like_the_reference(folder: Path, data: dict, microbatches: int) -> None:
    assert data["ok"] is True and data["failure"] is None, data["failure"]
    assert len(data["losses"]) == microbatches
    reference = json.loads((folder / "result.json").read_text())["reference_losses"]
    assert data["losses"] == pytest.approx(reference, rel=1e-4, abs=1e-6)
    assert data["instructions"] and all(
        r["end"] >= r["start"] >= 0 for r in data["instructions"]
    ), "every instruction is timed by CUDA events"


def test_nccl_gives_each_rank_its_own_gpu_and_trains_like_the_reference(tmp_path):
    """One rank per GPU (up to 4) on NCCL; with two or more GPUs the activations cross devices."""
    import torch

    stages = min(torch.cuda.device_count(), 4)
    folder = tmp_path / "run"
    out = _run(
        folder,
        "--kind",
        "1f1b",
        "--stages",
        str(stages),
        "--microbatches",
        "8",
        "--backend",
        "nccl",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    _assert_trained_like_the_reference(folder, json.loads(out.stdout), 8)
    starts = _starts(folder)
    assert [s["rank"] for s in starts] == list(range(stages))
    assert {s["backend"] for s in starts} == {"nccl"}
    assert [s["device"] for s in starts] == [f"cuda:{r}" for r in range(stages)]


def test_one_gpu_shared_by_four_ranks_over_gloo_trains_the_fixed_schedule(tmp_path):
    """Four ranks on the GPUs there are, exchanging through host memory (gloo)."""
    folder = tmp_path / "run"
    out = _run(
        folder,
        *FIXED,
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--backend",
        "gloo",
        "--device",
        "cuda",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    _assert_trained_like_the_reference(folder, json.loads(out.stdout), 8)
    starts = _starts(folder)
    assert [s["rank"] for s in starts] == [0, 1, 2, 3]
    assert {s["backend"] for s in starts} == {"gloo"}
    assert all(s["device"].startswith("cuda:") for s in starts), starts


def test_the_seed_schedule_fails_on_the_gpu_where_the_analysis_says(tmp_path):
    """The overwritten buffer is a property of the schedule: CUDA fails at the same instruction."""
    folder = tmp_path / "run"
    out = _run(
        folder,
        *SEED,
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--backend",
        "gloo",
        "--device",
        "cuda",
    )
    assert out.returncode == 1, out.stderr[-3000:]
    failure = json.loads(out.stdout)["failure"]
    assert (failure["rank"], failure["stage"], failure["step"], failure["instruction"]) == (
        2,
        2,
        6,
        "SendGrad(buffer_id=0)",
    )
    assert all(s["device"].startswith("cuda:") for s in _starts(folder))
