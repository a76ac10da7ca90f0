"""``instrument()`` on a GPU times each instruction by CUDA events, never by its launch.

DeepSpeed's per-instruction times came from ``perf_counter_ns`` alone: on a GPU an instruction
returns when its kernels are queued, so a forward read as its launch and its work landed in
whichever instruction synchronised next. The tracer now takes its marks from the engine's
device's clock. Pure logic here: a minimal engine that dispatches like DeepSpeed's (a class
``_INSTRUCTION_MAP``, a ``_train_schedule`` hook) and the stand-in ``torch.cuda`` of
``tests/pipeline/test_gpu_path_on_cpu.py``, whose device runs only when synchronised. The real
engine on a real GPU is ``test_deepspeed_engine_on_one_gpu_over_nccl_...`` in the gpu tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from explorer.pipeline.runtime.clock import CudaClock
from tests.pipeline.test_gpu_path_on_cpu import FakeCuda

pytestmark = pytest.mark.slow  # imports DeepSpeed (the tracer checks its version)


class ForwardPass:
    def __init__(self, buffer_id: int) -> None:
        self.buffer_id = buffer_id


class _Schedule:
    def __init__(self, steps: int) -> None:
        self._steps = [[ForwardPass(0)] for _ in range(steps)]

    def num_pipe_buffers(self) -> int:
        return 1

    def steps(self):
        return iter(self._steps)


class _Engine:
    """Dispatches as DeepSpeed's PipelineEngine does: class table, schedule hook, train_batch."""

    _INSTRUCTION_MAP: dict = {}

    def __init__(self, cuda: FakeCuda, steps: int, fail_at: int = -1) -> None:
        self.stage_id, self.micro_batches, self.num_stages = 0, steps, 1
        self.device = SimpleNamespace(type="cuda")
        self.cuda, self.steps, self.fail_at, self.calls = cuda, steps, fail_at, 0
        type(self)._INSTRUCTION_MAP = {ForwardPass: _Engine._forward}

    def _train_schedule(self) -> _Schedule:
        return _Schedule(self.steps)

    def _forward(self, buffer_id: int) -> None:
        self.calls += 1
        if self.calls - 1 == self.fail_at:  # a kernel faults: the device cannot be read any more
            self.cuda.broken = True
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        self.cuda.clock_ms += 5.0  # 5 ms of queued work: the device runs it later

    def train_batch(self) -> None:
        for cmds in self._train_schedule():
            for cmd in cmds:
                self._INSTRUCTION_MAP[type(cmd)](self, buffer_id=cmd.buffer_id)


def _lines(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "rank0.jsonl").read_text().splitlines() if x]


def _traced(tmp_path: Path, engine: _Engine, cuda: FakeCuda) -> Any:
    from explorer.pipeline.runtime.deepspeed.instrument import instrument

    return instrument(engine, tmp_path, run_id="run-1", clock=CudaClock(cuda))


def test_each_instruction_spans_its_queued_work_and_the_iteration_waits_once(tmp_path):
    cuda = FakeCuda(step_ms=0.0)  # recording an event costs the device nothing here
    engine = _Engine(cuda, steps=3)
    trace = _traced(tmp_path, engine, cuda)
    syncs = cuda.syncs
    engine.train_batch()
    trace.close()
    assert cuda.syncs == syncs + 1  # the iteration's end, not once per instruction
    instr = [x for x in _lines(tmp_path) if x["type"] == "instr"]
    assert [x["step"] for x in instr] == [0, 1, 2]
    spans = [x["end"] - x["start"] for x in instr]
    assert spans == pytest.approx([0.005] * 3)  # the work's 5 ms each, not a launch's microseconds


def test_a_device_error_leaves_a_lost_line_and_the_failure_line(tmp_path):
    cuda = FakeCuda(step_ms=0.0)
    engine = _Engine(cuda, steps=3, fail_at=1)
    trace = _traced(tmp_path, engine, cuda)
    with pytest.raises(RuntimeError, match="illegal memory access"):
        engine.train_batch()
    trace.close()
    kinds = [x["type"] for x in _lines(tmp_path)]
    assert kinds[-2:] == ["lost", "failure"], kinds
    failure = _lines(tmp_path)[-1]
    assert failure["step"] == 1 and failure["instruction"] == "ForwardPass(buffer_id=0)"


def test_the_clock_is_chosen_by_the_engines_device_whatever_its_form():
    import torch

    from explorer.pipeline.runtime.deepspeed.instrument import device_type

    for device, kind in [
        (torch.device("cuda", 0), "cuda"),
        ("cuda:1", "cuda"),
        (torch.device("cpu"), "cpu"),
        ("cpu", "cpu"),
    ]:
        assert device_type(SimpleNamespace(device=device)) == kind
    assert device_type(object()) == "cpu"  # an engine without a device attribute: the host's clock


def test_instructions_that_completed_before_a_failed_wait_are_kept(tmp_path):
    """A wait that fails (a hung or faulted device) loses only the marks it could not read."""

    class WaitFails(FakeCuda):
        def synchronize(self) -> None:
            if self.syncs >= 2:  # the clock's own two waits at its start went through
                raise RuntimeError("CUDA error: the launch timed out and was terminated")
            super().synchronize()

    class Engine(_Engine):
        def _forward(self, buffer_id: int) -> None:
            self.calls += 1
            if self.calls == 3:  # the device has run step 0 by now, not step 1; then a fault
                self.cuda.done_ms = 5.0
                raise RuntimeError("an error in step 2")
            self.cuda.clock_ms += 5.0

    cuda = WaitFails(step_ms=0.0)
    engine = Engine(cuda, steps=3)
    type(engine)._INSTRUCTION_MAP = {ForwardPass: Engine._forward}
    trace = _traced(tmp_path, engine, cuda)
    with pytest.raises(RuntimeError, match="an error in step 2"):
        engine.train_batch()
    trace.close()
    lines = _lines(tmp_path)
    assert [x["type"] for x in lines if x["type"] != "schedule"] == [
        "start",
        "instr",
        "lost",
        "failure",
    ]
    assert [x["step"] for x in lines if x["type"] == "instr"] == [0]
    assert next(x for x in lines if x["type"] == "lost")["instructions"] == 1
