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
