"""The compile probe on CUDA: inductor's Triton code, and iteration times that include the GPU work.

A user's step on a GPU queues kernels and returns; the probe synchronises the device around each
iteration so the time it records is the work's, not the launch's. The step below builds its model
lazily, so CUDA starts inside step 0 (the case a barrier decided once, before step 0, misses), and
it ends with a GPU-side sleep of known length: an iteration timed without the barrier would be far
shorter.
The step runs through ``explorer compile-probe --step`` in a child, as a user runs it.

``gpu``: skipped only where torch sees no CUDA device (``tests/conftest.py``); ``slow``: a
compiler and a process.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from cli_in_process import run_cli_child

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

USER_STEP = """
    import json
    import pathlib

    import torch

    CYCLES = 200_000_000
    HERE = pathlib.Path(__file__).parent
    built = {}

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(256, 256)
            self.k = 0

        def forward(self, x):
            return self.lin(x) * self.k

    def _build():
        \"\"\"Step 0 is where this process first touches CUDA: nothing before it starts CUDA.\"\"\"
        (HERE / "first_touch.json").write_text(
            json.dumps({"initialized_before_step_0": torch.cuda.is_initialized()})
        )
        built["net"] = net = Net().cuda()
        built["model"] = torch.compile(net)  # the default: inductor, Triton kernels on CUDA
        built["x"] = torch.ones(64, 256, device="cuda")
        # How long the GPU sleep takes on this device, measured with CUDA events.
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(CYCLES)
        end.record()
        torch.cuda.synchronize()
        (HERE / "sleep.json").write_text(json.dumps({"ms": start.elapsed_time(end)}))

    def step(iteration):
        if not built:
            _build()
        built["net"].k = iteration % 2  # a guard on k: two cached variants, used in turn
        built["model"](built["x"]).sum().backward()
        torch.cuda._sleep(CYCLES)  # queued; the call returns at once
"""


def test_a_cuda_step_compiles_with_inductor_and_its_time_includes_the_gpu_work(tmp_path):
    from explorer.compile.runtime import default_backend

    assert default_backend("cuda") == "inductor"  # tensors on CUDA: Triton, no C++ compiler
    (tmp_path / "train_gpu.py").write_text(textwrap.dedent(USER_STEP))
    out = run_cli_child(
        ["compile-probe", "--step", "train_gpu:step", "--iterations", "10", "--json"],
        cwd=tmp_path,
        timeout=600,
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: a finding (the cycle)
    doc = json.loads(out.stdout)
    assert doc["failure"] is None and doc["ok"] == (out.returncode == 0), doc["error"]
    first = json.loads((tmp_path / "first_touch.json").read_text())
    assert first["initialized_before_step_0"] is False, "CUDA was started before step 0"
    its = doc["iterations"]
    assert [it["variant"] for it in its] == ["0/0", "0/1"] * 5
    assert [it["compiled"] for it in its] == [True, True] + [False] * 8
    assert (doc["cause"], doc["period"]) == ("cycling", 2)
    assert [it["synchronized"] for it in its] == [True] * 10
    sleep_ms = json.loads((tmp_path / "sleep.json").read_text())["ms"]
    assert sleep_ms > 20, f"the calibration sleep took {sleep_ms:.1f} ms"
    slowest_launch = 0.8 * sleep_ms
    assert all(it["ms"] >= slowest_launch for it in its), (
        f"iterations shorter than the {sleep_ms:.1f} ms the GPU slept: "
        f"{[it['ms'] for it in its]} (the probe did not wait for the device)"
    )
