"""The GPU path's logic, proved on CPU: what a CUDA rank sets, how its marks are read, what it is compared with.

No GPU has run this project's CI. Each finding below would have failed the first CUDA run; each
is pure logic, so each is tested here, with a small stand-in for ``torch.cuda`` where events are
needed (``FakeCuda``: events that complete when the stand-in device is synchronised, times that
advance by a fixed step). The same paths on a real GPU are ``tests/pipeline/test_pipeline_gpu.py``
and ``benchmarks/device_check.sh``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from explorer.pipeline.runtime.clock import CpuClock, CudaClock
from explorer.pipeline.runtime.determinism import (
    CUBLAS_WORKSPACE,
    gpu_index,
    prepare_rank,
    rank_environment,
)
from explorer.pipeline.runtime.executor import classify
from explorer.pipeline.runtime.p2p import Channels, directions
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.runtime.spec import device_refusal
from explorer.pipeline.schedules.instructions import Instruction, Kind

ROOT = Path(__file__).resolve().parents[2]


# --- a stand-in for torch.cuda ------------------------------------------------------------------


class FakeEvent:
    """A CUDA event: recorded at the device's current time, completed once the device caught up."""

    def __init__(self, device: "FakeCuda", enable_timing: bool = True) -> None:
        self.device, self.at = device, None

    def record(self) -> None:
        self.device.clock_ms += self.device.step_ms
        self.at = self.device.clock_ms

    def query(self) -> bool:
        if self.device.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.at is not None and self.at <= self.device.done_ms

    def elapsed_time(self, other: "FakeEvent") -> float:
        if self.device.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        if not (self.query() and other.query()):
            raise RuntimeError("elapsed_time on an event that has not completed")
        assert self.at is not None and other.at is not None
        return other.at - self.at


class FakeCuda:
    """``torch.cuda``'s ``Event`` and ``synchronize``: the device runs only when synchronised."""

    def __init__(self, step_ms: float = 2.0) -> None:
        self.clock_ms, self.done_ms, self.step_ms = 0.0, 0.0, step_ms
        self.syncs, self.broken = 0, False

    def Event(self, enable_timing: bool = True) -> FakeEvent:  # noqa: N802 - torch.cuda's name
        return FakeEvent(self, enable_timing)

    def synchronize(self) -> None:
        if self.broken:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.syncs += 1
        self.done_ms = self.clock_ms


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- 1. cuBLAS and deterministic algorithms ------------------------------------------------------


def test_a_cuda_rank_gets_the_cublas_workspace_deterministic_algorithms_need():
    """torch refuses the first cuBLAS product under deterministic algorithms without it."""
    assert rank_environment("gloo", "cuda", {}) == {"CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE}
    assert rank_environment("nccl", "cuda", {})["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    # a value the user chose stays theirs; a CPU rank needs nothing
    assert rank_environment("gloo", "cuda", {"CUBLAS_WORKSPACE_CONFIG": ":16:8"}) == {}
    assert rank_environment("gloo", "cpu", {}) == {}


def test_prepare_rank_sets_the_variable_before_it_turns_on_deterministic_algorithms():
    import torch

    environ: dict[str, str] = {}
    before = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    try:
        prepare_rank("gloo", "cuda", 1, environ)
        assert environ["CUBLAS_WORKSPACE_CONFIG"] == CUBLAS_WORKSPACE
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_num_threads(before[1])


def test_every_worker_turns_on_determinism_through_prepare_rank_only():
    """A worker that calls ``use_deterministic_algorithms`` itself would miss the variable."""
    runtime = ROOT / "explorer" / "pipeline" / "runtime"
    workers = [
        runtime / "worker.py",
        runtime / "torch_worker.py",
        runtime / "deepspeed" / "worker.py",
    ]
    for path in workers:
        text = path.read_text()
        assert "prepare_rank(" in text, path
        assert "use_deterministic_algorithms" not in text, path


# --- 2. NCCL: a stuck exchange raises where it waited -----------------------------------------


def test_an_nccl_rank_blocks_in_the_exchange_so_a_stall_names_its_instruction():
    assert rank_environment("nccl", "cuda", {})["TORCH_NCCL_BLOCKING_WAIT"] == "1"
    assert "TORCH_NCCL_BLOCKING_WAIT" not in rank_environment("gloo", "cuda", {})
    # NCCL's words for a stall, blocking wait and watchdog, are a timeout like gloo's
    assert (
        classify(RuntimeError("Work WorkNCCL(SeqNum=7, OpType=RECV) timed out in blocking wait."))
        == "timeout"
    )
    assert (
        classify(RuntimeError("WorkNCCL(SeqNum=3) ran for 20001 milliseconds before timing out."))
        == "timeout"
    )


def test_each_direction_between_ranks_is_its_own_communicator_with_the_instructions_tags():
    """NCCL ignores tags: the direction's group is what keeps activations and gradients apart."""
    assert directions([0, 1, 2]) == [(0, (0, 1)), (3, (0, 1)), (2, (1, 2)), (5, (1, 2))]
    interleaved = directions([0, 1, 0, 1])  # two stages per rank: six directions, one pair
    assert [pair for _, pair in interleaved] == [(0, 1)] * 6
    assert len({tag for tag, _ in interleaved}) == 6
    assert directions([0, 0]) == []  # stages on one rank hand over locally
    send = Instruction(1, Kind.SEND_ACTIVATION, 0, 0)
    recv = Instruction(1, Kind.RECV_GRAD, 0, 0)
    tags = {tag for tag, _ in directions([0, 1, 2])}
    assert Channels.tag(1, Kind.SEND_ACTIVATION) in tags  # the tag stage 1's send uses
    assert Channels.tag(Channels.peer_stage(recv), Kind.RECV_GRAD) in tags
    assert Channels.peer_stage(send) == 2


def test_channels_send_and_receive_on_the_direction_group(monkeypatch):
    import torch
    import torch.distributed as dist

    calls: list[tuple[str, Any]] = []
    monkeypatch.setattr(
        dist, "send", lambda t, dst, group=None, tag=0: calls.append(("send", group))
    )
    monkeypatch.setattr(
        dist, "recv", lambda t, src, group=None, tag=0: calls.append(("recv", group))
    )
    groups = {tag: f"group-{tag}" for tag, _ in directions([0, 1, 2])}
    shape = (torch.Size([2, 3]), torch.float32)
    channels = Channels(
        1,
        (0, 1, 2),
        [shape] * 4,
        blocking=True,
        device=torch.device("cpu"),
        via_host=False,
        groups=groups,
    )
    channels.send(Instruction(1, Kind.SEND_ACTIVATION, 0, 0), torch.zeros(2, 3))
    channels.send(Instruction(1, Kind.SEND_GRAD, 0, 0), torch.zeros(2, 3))
    channels.recv(Instruction(1, Kind.RECV_ACTIVATION, 0, 0))
    channels.recv(Instruction(1, Kind.RECV_GRAD, 0, 0))
    assert calls == [
        ("send", "group-2"),
        ("send", "group-3"),
        ("recv", "group-0"),
        ("recv", "group-5"),
    ]


# --- 3. the failure path with marks that are CUDA events --------------------------------------


def _recorder(tmp_path: Path, clock: Any) -> Recorder:
    recorder = Recorder(tmp_path, 0, "run-1")
    recorder.start([0], clock.base_ns, clock, device="cuda:0", backend="gloo")
    return recorder


def test_the_cuda_clock_reads_completed_events_without_waiting_and_the_rest_with_one_wait():
    cuda = FakeCuda(step_ms=2.0)
    clock = CudaClock(cuda)
    syncs = cuda.syncs
    a, b = clock.now(), clock.now()
    assert not clock.ready(b)
    ns = clock.resolve([a, b])  # pending: one wait
    assert cuda.syncs == syncs + 1
    assert ns[1] - ns[0] == 2_000_000  # the device's 2 ms, not the host's
    c = clock.now()
    cuda.synchronize()
    syncs = cuda.syncs
    assert clock.ready(c) and clock.resolve([c])[0] - ns[1] == 2_000_000
    assert cuda.syncs == syncs  # completed: no wait


def test_a_rank_with_pending_cuda_marks_writes_them_and_then_its_failure_line(tmp_path):
    cuda = FakeCuda()
    recorder = _recorder(tmp_path, CudaClock(cuda))
    for step in range(3):
        ins = Instruction(0, Kind.FORWARD, step, 0)
        recorder.add(0, step, ins, recorder.clock.now(), recorder.clock.now())
    recorder.flush_ready()  # the device has not run them: nothing readable yet, nothing waits
    assert [x["type"] for x in _lines(recorder.path)] == ["start"]
    recorder.flush_before_failure()
    from explorer.failure import FailureKind, from_exception

    recorder.failure(from_exception(RuntimeError("boom"), FailureKind.ERROR, step=2), text=None)
    recorder.close()
    lines = _lines(recorder.path)
    assert [x["type"] for x in lines] == ["start", "instr", "instr", "instr", "failure"]
    spans = [(x["end"] - x["start"]) for x in lines if x["type"] == "instr"]
    assert spans == pytest.approx([0.002] * 3)


def test_a_device_that_cannot_be_read_any_more_loses_the_marks_but_not_the_failure_line(tmp_path):
    cuda = FakeCuda()
    recorder = _recorder(tmp_path, CudaClock(cuda))
    recorder.add(
        0, 0, Instruction(0, Kind.FORWARD, 0, 0), recorder.clock.now(), recorder.clock.now()
    )
    cuda.broken = True  # a kernel faulted: every read of the device raises from now on
    recorder.flush_before_failure()
    from explorer.failure import FailureKind, from_exception

    recorder.failure(
        from_exception(RuntimeError("illegal memory access"), FailureKind.ERROR), text=None
    )
    recorder.close()
    lines = _lines(recorder.path)
    assert [x["type"] for x in lines] == ["start", "lost", "failure"]
    assert lines[1]["instructions"] == 1 and "illegal memory access" in lines[1]["message"]


def _one_stage_executor(tmp_path: Path, clock: Any, fault_step: int):
    """A real one-rank executor (one stage: no exchange) with a fault planted at ``fault_step``."""
    import torch

    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.executor import RankExecutor
    from explorer.pipeline.runtime.models import build_model
    from explorer.pipeline.runtime.spec import Fault, ModelSpec
    from explorer.pipeline.runtime.stage_state import StageState

    schedule = build("1f1b", 1, 2)
    model = build_model(ModelSpec("mlp"), 1, 4, 0)
    state = StageState(
        0, model.stages[0], schedule.buffers[0], first=True, last=True,
        loss_fn=model.loss_fn, num_microbatches=2,
    )  # fmt: skip
    channels = Channels(
        0, schedule.stage_to_rank, [], blocking=True, device=torch.device("cpu"), via_host=False
    )
    recorder = _recorder(tmp_path, clock)
    fault = Fault(0, fault_step, "raise")
    executor = RankExecutor(
        0, schedule, {0: state}, channels, model.data_fn, torch.device("cpu"), recorder, fault
    )
    return executor, recorder


def test_a_fault_after_step_0_under_the_cuda_clock_is_the_fault_not_a_type_error(tmp_path):
    """The injected fault flushed raw events: every fault at step > 0 became a TypeError."""
    from explorer.pipeline.runtime.executor import InstructionFailed

    executor, recorder = _one_stage_executor(tmp_path, CudaClock(FakeCuda()), fault_step=2)
    with pytest.raises(InstructionFailed, match="fault injected on rank 0 at step 2") as caught:
        executor.run(0, clock=recorder.clock)
    assert caught.value.step == 2
    recorder.close()
    instr = [x for x in _lines(recorder.path) if x["type"] == "instr"]
    assert sorted({x["step"] for x in instr}) == [0, 1]  # every step before the fault, timed
    assert all(isinstance(x["start"], float) and x["end"] > x["start"] for x in instr)


def test_the_cpu_clock_writes_each_step_as_it_ends(tmp_path):
    executor, recorder = _one_stage_executor(tmp_path, CpuClock(), fault_step=99)
    executor.run(0, clock=recorder.clock)
    recorder.close()
    assert sorted({x["step"] for x in _lines(recorder.path) if x["type"] == "instr"}) == [
        0,
        1,
        2,
        3,
    ]


# --- 4. the reference is trained where the run trained ------------------------------------------


def test_the_reference_trains_on_the_runs_device_and_the_result_names_it_and_the_tolerance(
    tmp_path, monkeypatch
):
    """cuBLAS adds in another order than the CPU: a CPU reference calls a right CUDA run DIFFERENT."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import result_writer
    from explorer.pipeline.runtime.models import build_model
    from explorer.pipeline.runtime.reference import train_reference
    from explorer.pipeline.runtime.spec import RunSpec

    asked: list[str] = []

    def on_cpu_but_noted(model, iterations, microbatches, lr=0.1, device="cpu"):
        asked.append(device)
        return train_reference(model, iterations, microbatches, lr)

    monkeypatch.setattr(result_writer, "train_reference", on_cpu_but_noted)
    spec = RunSpec.for_schedule(build("1f1b", 1, 2))
    run = train_reference(build_model(spec.model, 1, spec.microbatch_size, spec.seed), 1, 2)
    gathered = [{"losses": run.losses, "grads": {0: run.grads[0]}}]
    doc = result_writer.write_result(
        tmp_path / "result.json", spec, 1, 2, gathered, 1, device="cuda:0"
    )
    assert asked == ["cuda:0"]
    assert doc["reference_device"] == "cuda:0" and doc["bitwise_equal_to_reference"] is True
    assert doc["tolerance"] == {"rtol": result_writer.RTOL, "atol": result_writer.ATOL}
    assert json.loads((tmp_path / "result.json").read_text())["reference_device"] == "cuda:0"


def test_every_engine_passes_rank_0s_device_to_the_result():
    runtime = ROOT / "explorer" / "pipeline" / "runtime"
    for path in (runtime / "worker.py", runtime / "deepspeed" / "worker.py"):
        assert "device=str(device)" in path.read_text(), path


# --- 5. device, backend and engine: refused before anything starts --------------------------


@pytest.mark.parametrize(
    "engine, backend, ranks, gpus, words",
    [
        ("deepspeed", "gloo", 4, 1, "gloo's send"),  # CUDA tensors into gloo's send
        ("torch", "gloo", 4, 1, "gloo/CPU only"),  # would silently run on CPU
        ("all", "gloo", 4, 8, "gloo/CPU only"),
        ("explorer", "nccl", 4, 1, "one GPU per rank"),  # NCCL refuses two ranks on one GPU
        ("deepspeed", "nccl", 4, 2, "one GPU per rank"),
        ("explorer", "gloo", 4, 0, "no CUDA device"),
    ],
)
def test_impossible_device_backend_pairs_are_refused_with_what_to_change(
    engine, backend, ranks, gpus, words
):
    why = device_refusal(engine, backend, "cuda", ranks, gpus)
    assert why is not None and words in why and "\n" not in why
    assert "use " in why  # says what to change


@pytest.mark.parametrize(
    "engine, backend, ranks, gpus",
    [
        ("explorer", "gloo", 4, 1),
        ("explorer", "nccl", 4, 4),
        ("deepspeed", "nccl", 2, 2),
        ("deepspeed", "nccl", 1, 1),
    ],
)
def test_possible_pairs_pass(engine, backend, ranks, gpus):
    assert device_refusal(engine, backend, "cuda", ranks, gpus) is None
    assert device_refusal(engine, backend, "cpu", ranks, 0) is None


def test_ranks_beyond_the_gpus_share_them_in_turn():
    assert [gpu_index(r, 2) for r in range(5)] == [0, 1, 0, 1, 0]
    assert gpu_index(3, 0) == 0  # never a device ordinal that cannot exist


def test_both_engines_pick_their_gpu_by_the_same_rule():
    """DeepSpeed's worker set ``LOCAL_RANK`` as the device: invalid where ranks outnumber GPUs."""
    runtime = ROOT / "explorer" / "pipeline" / "runtime"
    for path in (runtime / "worker.py", runtime / "deepspeed" / "worker.py"):
        text = path.read_text()
        assert "gpu_index(local, torch.cuda.device_count())" in text, path
        assert 'set_device(int(os.environ.get("LOCAL_RANK"' not in text, path


def test_the_cli_refuses_deepspeed_on_gloo_with_cuda_in_one_line_naming_the_pair():
    from cli_in_process import call_cli

    out = call_cli(
        ["run", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--engine", "deepspeed"]
        + ["--backend", "gloo", "--device", "cuda"]
    )
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "gloo's send" in out.stderr and "Traceback" not in out.stderr


def test_the_python_api_refuses_what_the_cli_refuses():
    from explorer.errors import InputError
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import Launch, RunSpec

    spec = RunSpec.for_schedule(build("1f1b", 2, 4), device="cuda", engine="deepspeed")
    with pytest.raises(InputError, match="gloo's send"):
        Launch(spec)


def test_marks_that_completed_are_kept_when_only_the_wait_fails(tmp_path):
    """The wait for the device fails (it hangs or faults) but completed events still read."""

    class WaitFails(FakeCuda):
        def synchronize(self) -> None:
            if self.syncs >= 2:  # the clock's own two waits at its start went through
                raise RuntimeError("CUDA error: the launch timed out and was terminated")
            super().synchronize()

    cuda = WaitFails()
    recorder = _recorder(tmp_path, CudaClock(cuda))
    clock = recorder.clock
    recorder.add(0, 0, Instruction(0, Kind.FORWARD, 0, 0), clock.now(), clock.now())
    cuda.done_ms = cuda.clock_ms  # the device ran the first instruction
    recorder.add(0, 1, Instruction(0, Kind.FORWARD, 1, 0), clock.now(), clock.now())
    recorder.flush_before_failure()
    recorder.close()
    lines = _lines(recorder.path)
    assert [x["type"] for x in lines] == ["start", "instr", "lost"]
    assert lines[1]["step"] == 0 and lines[2]["instructions"] == 1
    assert "timed out" in lines[2]["message"]


@pytest.mark.parametrize("engine", ["explorer", "deepspeed"])
def test_cuda_ranks_start_afresh_and_cpu_ranks_are_forked_from_the_template(
    engine, tmp_path, monkeypatch
):
    """A process forked after CUDA was asked for its devices (DeepSpeed's import may ask)
    cannot use CUDA: a CUDA run's ranks each start from a fresh interpreter. DeepSpeed's import
    in the template is told its accelerator, so that it does not look."""
    from dataclasses import replace

    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.launch import PipelineEngine
    from explorer.pipeline.runtime.spec import RunSpec
    from explorer.pipeline.traces.follow import Follower

    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    spec = replace(RunSpec.for_schedule(build("1f1b", 2, 2)), engine=engine)
    for device, warm in (("cpu", True), ("cuda", False)):
        on = replace(spec, device=device)
        children = PipelineEngine(on, tmp_path, Follower(tmp_path, on.run_id)).children()
        assert [c.warm for c in children] == [warm, warm]
        if engine == "deepspeed":
            assert {c.env["DS_ACCELERATOR"] for c in children} == {device}
