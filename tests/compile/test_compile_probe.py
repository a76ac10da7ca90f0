"""The probe's own behaviour: record sources agree, user steps, errors kept, light import."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from explorer.compile.runtime import load_step, run_scenario, run_step
from explorer.errors import InputError


def _shape(r):
    return [(c.compile_id, c.iteration, c.guard, c.failed) for c in r.compiles]


@pytest.mark.slow  # real torch.compile
def test_log_parsing_fallback_sees_what_the_metrics_see() -> None:
    by_metrics = run_scenario("limit", iterations=8, backend="aot_eager", source="metrics")
    by_log = run_scenario("limit", iterations=8, backend="aot_eager", source="log")
    assert (by_metrics.source, by_log.source) == ("metrics", "log")
    assert _shape(by_log) == _shape(by_metrics)
    assert [c.failed for c in by_log.compiles].count("RecompileLimitExceeded") == 1
    assert by_log.diagnosis.cause == by_metrics.diagnosis.cause == "eager-fallback"


@pytest.mark.slow  # real torch.compile
def test_log_source_records_graph_breaks() -> None:
    r = run_scenario("graph-break", iterations=3, backend="aot_eager", source="log")
    assert r.graph_breaks and "disable" in r.graph_breaks[0].reason


def _user_module(tmp_path, body: str) -> str:
    path = tmp_path / "user_train.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


CYCLING_USER = """
    import torch
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(32, 32)
            self.k = 0
        def forward(self, x):
            return self.lin(x) * self.k
    net = Net()
    model = torch.compile(net, backend="aot_eager")
    x = torch.ones(4, 32)
    def step(iteration):
        net.k = iteration % 2
        model(x).sum().backward()
        if iteration == 7:
            raise RuntimeError("loss is nan")
"""


@pytest.mark.slow  # real torch.compile
def test_user_step_variants_come_from_dynamos_cache_and_errors_are_kept(tmp_path) -> None:
    import torch._dynamo

    torch._dynamo.reset()
    step = load_step(_user_module(tmp_path, CYCLING_USER) + ":step")
    r = run_step(step, 10)
    assert r.variant_source == "dynamo cache"
    assert [it.variant for it in r.iterations] == ["0/0", "0/1"] * 3 + ["0/0"]
    assert r.error is not None and "iteration 7" in r.error and "loss is nan" in r.error
    assert len(r.iterations) == 7 and r.to_json()["ok"] is False
    assert (r.diagnosis.cause, r.diagnosis.period) == ("cycling", 2)


@pytest.mark.parametrize(
    "spec, words",
    [
        ("nocolon", "expected MODULE:FUNCTION"),
        ("no_such_module_xyz:step", "cannot import module 'no_such_module_xyz'"),
        ("missing.py:step", "does not exist"),
        ("os:sep", "not a function"),
        ("os.path:nothing_here", "has no attribute 'nothing_here'"),
    ],
)
def test_bad_step_specs(spec: str, words: str) -> None:
    with pytest.raises(InputError, match=words):
        load_step(spec)


def test_step_must_take_the_iteration(tmp_path) -> None:
    path = _user_module(tmp_path, "def step():\n    pass\n")
    with pytest.raises(InputError, match="must accept one argument"):
        load_step(path + ":step")


def test_iterations_and_dynamo_options_are_validated() -> None:
    from explorer.compile.runtime.probe import probe

    with pytest.raises(InputError, match="positive integer"):
        probe(lambda i: None, 0)
    with pytest.raises(InputError, match="no option"):
        probe(lambda i: None, 1, dynamo_config={"not_an_option": 1})


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_probe_package_does_not_import_torch() -> None:
    code = (
        "import sys, explorer.compile.runtime, explorer.compile.cli.probe; "
        "print(sorted(m for m in ('torch', 'plotly', 'ipywidgets') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "available, initialized, wait",
    [(False, False, False), (False, True, False), (True, False, False), (True, True, True)],
)
def test_the_barrier_is_due_only_where_cuda_is_up(available, initialized, wait) -> None:
    from explorer.compile.runtime.probe import should_synchronize

    assert should_synchronize(available, initialized) is wait


class FakeCuda:
    """``torch.cuda`` as a step that first touches CUDA inside step 0 leaves it.

    ``is_initialized()`` turns True when the step first queues work; queued work is
    ``work_s`` of device time that only ``synchronize()`` waits for, as kernels are.
    """

    def __init__(self, work_s: float) -> None:
        self.work_s = work_s
        self.initialized = False
        self.pending_until = 0.0
        self.synchronize_calls = 0

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return self.initialized

    def launch(self) -> None:
        """Queue ``work_s`` of device work and return at once (a kernel launch)."""
        import time

        self.initialized = True
        self.pending_until = max(self.pending_until, time.perf_counter()) + self.work_s

    def synchronize(self) -> None:
        import time

        self.synchronize_calls += 1
        time.sleep(max(0.0, self.pending_until - time.perf_counter()))


def _fake_cuda(monkeypatch, work_s: float) -> FakeCuda:
    """Put a :class:`FakeCuda` behind ``torch.cuda``'s three calls the probe makes."""
    import torch

    fake = FakeCuda(work_s)
    for name in ("is_available", "is_initialized", "synchronize"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    return fake


def test_a_step_that_starts_cuda_in_step_zero_is_timed_by_its_work(monkeypatch) -> None:
    """The barrier is decided each iteration: step 0 starts CUDA, and its own work is in its time.

    Decided once before step 0 (CUDA not yet up), no iteration would wait and each would
    read as its launch only; the lower bound below holds by construction once it waits.
    """
    from explorer.compile.runtime.probe import probe

    fake = _fake_cuda(monkeypatch, work_s=0.05)
    r = probe(lambda i: fake.launch(), 3, reset=False)
    assert r.error is None
    # step 0: no barrier before it (nothing could be pending), one after; then two each
    assert fake.synchronize_calls == 1 + 2 + 2
    assert [it.synchronized for it in r.iterations] == [True] * 3
    assert all(it.ms >= 1e3 * fake.work_s for it in r.iterations), [it.ms for it in r.iterations]
    assert [it["synchronized"] for it in r.to_json()["iterations"]] == [True] * 3


def test_a_cpu_step_is_not_synchronized_and_says_so(monkeypatch) -> None:
    from explorer.compile.runtime.probe import probe

    fake = _fake_cuda(monkeypatch, work_s=0.0)  # CUDA visible, never started by the step
    r = probe(lambda i: None, 2, reset=False)
    assert fake.synchronize_calls == 0
    assert [it.synchronized for it in r.iterations] == [False, False]
