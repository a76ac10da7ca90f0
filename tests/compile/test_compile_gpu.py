"""The compile probe on CUDA: inductor's Triton code, and iteration times that include the GPU work.

A user's step on a GPU queues kernels and returns; the probe synchronises the device around each
iteration so the time it records is the work's, not the launch's. The step below ends with a
GPU-side sleep of known length: an iteration timed without that barrier would be far shorter.
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

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(256, 256)
            self.k = 0

        def forward(self, x):
            return self.lin(x) * self.k

    net = Net().cuda()
    model = torch.compile(net)  # the default backend: inductor, Triton kernels on CUDA
    x = torch.ones(64, 256, device="cuda")

    # How long the GPU sleep takes on this device, measured with CUDA events.
    CYCLES = 200_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(CYCLES)
    end.record()
    torch.cuda.synchronize()
    pathlib.Path(__file__).with_name("sleep.json").write_text(
        json.dumps({"ms": start.elapsed_time(end)})
    )

    def step(iteration):
        net.k = iteration % 2  # a guard on k: two cached variants, used in turn
        model(x).sum().backward()
        torch.cuda._sleep(CYCLES)  # queued; the call returns at once
"""


def test_a_cuda_step_compiles_with_inductor_and_its_time_includes_the_gpu_work(tmp_path):
    from explorer.compile.runtime import default_backend

    assert default_backend() == "inductor"  # a CUDA device: Triton needs no C++ compiler
    (tmp_path / "train_gpu.py").write_text(textwrap.dedent(USER_STEP))
    out = run_cli_child(
        ["compile-probe", "--step", "train_gpu:step", "--iterations", "10", "--json"],
        cwd=tmp_path,
        timeout=600,
    )
    assert out.returncode in (0, 1), out.stderr[-3000:]  # 1: a finding (the cycle)
    doc = json.loads(out.stdout)
    assert doc["ok"] is True, doc["error"]
    its = doc["iterations"]
    assert [it["variant"] for it in its] == ["0/0", "0/1"] * 5
    assert [it["compiled"] for it in its] == [True, True] + [False] * 8
    assert (doc["cause"], doc["period"]) == ("cycling", 2)
    sleep_ms = json.loads((tmp_path / "sleep.json").read_text())["ms"]
    assert sleep_ms > 20, f"the calibration sleep took {sleep_ms:.1f} ms"
    slowest_launch = 0.8 * sleep_ms
    assert all(it["ms"] >= slowest_launch for it in its), (
        f"iterations shorter than the {sleep_ms:.1f} ms the GPU slept: "
        f"{[it['ms'] for it in its]} (the probe did not wait for the device)"
    )
