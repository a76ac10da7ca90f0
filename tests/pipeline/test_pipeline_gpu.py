"""The real pipeline on CUDA: NCCL with one GPU per rank, and one GPU shared by ranks over gloo.

These are the paths ``explorer run --backend nccl`` and ``explorer run --backend gloo --device
cuda`` take on a GPU machine, run through the CLI as a user runs them. They need a CUDA device
(``gpu``: ``tests/conftest.py`` skips them only where torch sees none) and start one process
per rank (``slow``). The reference trains on the run's own device, so a right run is bitwise
equal to it there too (a CPU reference would differ in the last bits: cuBLAS adds in another
order); the result file names the reference's device and the tolerance of ``within_tolerance``.
Beside the runs: the CUDA clock against a GPU sleep of known length, a fault on CUDA with its
failure line, and DeepSpeed's engine on one GPU.
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
    result = json.loads((folder / "result.json").read_text())
    assert result["reference_device"].startswith("cuda"), result["reference_device"]
    assert data["losses"] == pytest.approx(result["reference_losses"], rel=1e-4, abs=1e-6)
    assert data["bitwise_equal_to_reference"] is True, (
        f"max |diff| {result['max_abs_diff_to_reference']} to a reference trained on "
        f"{result['reference_device']}"
    )
    assert data["instructions"] and all(
        r["end"] >= r["start"] >= 0 for r in data["instructions"]
    ), "every instruction is timed"


@pytest.mark.gpus(2)  # NCCL refuses two ranks on one GPU: on one GPU this would test no exchange
def test_nccl_gives_each_rank_its_own_gpu_and_trains_like_the_reference(tmp_path):
    """One rank per GPU (up to 4) on NCCL: the activations and gradients cross devices."""
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


def test_one_rank_on_one_gpu_over_nccl_trains_bitwise_like_a_reference_on_that_gpu(tmp_path):
    """World size 1: no exchange, but NCCL's set-up, the CUDA clock and the same-device reference."""
    folder = tmp_path / "run"
    out = _run(
        folder, "--kind", "1f1b", "--stages", "1", "--microbatches", "4", "--backend", "nccl"
    )
    assert out.returncode == 0, out.stderr[-3000:]
    _assert_trained_like_the_reference(folder, json.loads(out.stdout), 4)
    assert [s["device"] for s in _starts(folder)] == ["cuda:0"]


def test_the_cuda_clock_measures_a_gpu_sleep_by_its_length_not_its_launch():
    """A sleep the GPU runs for a known time: the clock's marks span it; the host's launch does not."""
    import time

    import torch

    from explorer.pipeline.runtime.clock import CudaClock

    torch.cuda.init()
    cycles = _cycles_for_ms(50.0)
    torch.cuda.synchronize()
    host_start = time.perf_counter_ns()
    torch.cuda._sleep(cycles)
    torch.cuda.synchronize()
    host_ms = (time.perf_counter_ns() - host_start) / 1e6  # the sleep's length, by the host
    clock = CudaClock()
    launch_start = time.perf_counter_ns()
    a = clock.now()
    torch.cuda._sleep(cycles)
    b = clock.now()
    launch_ms = (time.perf_counter_ns() - launch_start) / 1e6
    start_ns, end_ns = clock.resolve([a, b])
    clock_ms = (end_ns - start_ns) / 1e6
    assert clock_ms == pytest.approx(host_ms, rel=0.2, abs=2.0), (clock_ms, host_ms)
    assert launch_ms < 0.5 * clock_ms, f"the launch took {launch_ms:.1f} ms: no sleep was queued"
    assert start_ns >= clock.base_ns  # on the host's axis, after the clock's zero


def _cycles_for_ms(ms: float) -> int:
    """GPU clock cycles that ``torch.cuda._sleep`` spends in about ``ms`` on this device."""
    import torch

    probe = 10_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(probe)
    end.record()
    torch.cuda.synchronize()
    return int(probe * ms / max(start.elapsed_time(end), 1e-3))


def test_a_fault_on_cuda_is_written_with_every_step_timed_before_it(tmp_path):
    """The failure path flushes CUDA events: the fault's own line, not a TypeError, and the steps before it."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import Fault, RunSpec, run_pipeline

    spec = RunSpec.for_schedule(
        build("1f1b", 4, 8), backend="gloo", device="cuda", fault=Fault(1, 5, "raise")
    )
    result = run_pipeline(spec, tmp_path / "run", timeout_s=300)
    failure = result.failure
    assert failure is not None and not result.ok
    assert (failure.rank, failure.step) == (1, 5), failure
    assert "fault injected on rank 1 at step 5" in failure.message, failure.message
    steps = {r["step"] for r in result.records if r["rank"] == 1}
    busy = {s for s, step in enumerate(spec.build_schedule().stream(1)[:5]) if step}
    assert steps == busy, sorted(steps)  # every step before the fault, timed on the GPU


def test_deepspeed_engine_on_one_gpu_over_nccl_trains_bitwise_like_the_reference(tmp_path):
    """DeepSpeed's own engine on CUDA: its device, its clock (CUDA events), the same-device reference."""
    folder = tmp_path / "run"
    out = _run(
        folder,
        *FIXED,
        "--stages",
        "1",
        "--microbatches",
        "4",
        "--engine",
        "deepspeed",
        "--backend",
        "nccl",
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    _assert_trained_like_the_reference(folder, json.loads(out.stdout), 4)
