"""The runner against real torch_xla 2.9 on PJRT CPU: graphs settle, recompiles are explained, aborts come back."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from explorer.errors import InputError
from explorer.xla.runtime import STEP_KEYS, run_scenario, run_step

pytestmark = pytest.mark.slow


def test_steady_loop_settles_to_a_fixed_set_of_graphs(steady_run) -> None:
    run = steady_run
    assert run.ok, run.failure
    assert [s.step for s in run.steps] == list(range(5))
    assert run.steps[0].compiled and run.steps[0].new_graphs
    later = run.steps[2:]
    assert not any(s.compiled or s.new_graphs for s in later)
    assert len({s.graph_hash for s in later}) == 1
    assert all(s.cause.startswith("new graph: no, because graph") for s in later)
    assert all(s.cached >= 1 and s.compile_ms == 0 for s in later)
    steady = run.graph(later[0].graph_hash)
    assert steady.steps_ran == [
        s for s in range(1, 5) if run.steps[s].graph_hash == steady.graph_hash
    ]
    assert run.steps[0].compile_ms > 0 and all(s.execute_ms > 0 for s in run.steps)


def test_graphs_carry_their_hlo_joined_by_hash(steady_run) -> None:
    run = steady_run
    trained = [g for g in run.graphs if g.step >= 0]
    assert trained and all(g.hlo_path and os.path.isfile(g.hlo_path) for g in trained)
    for g in trained:
        module = run.modules[g.graph_hash]
        assert module.parameter_count == g.num_parameters == len(g.parameter_shapes)
        assert module.name.startswith("SyncTensorsGraph")
    # step 1 adds the momentum buffers: the same program, so a recompile of step 0's graph
    second = run.graph(run.steps[1].new_graphs[-1])
    assert second.recompile and second.closest == run.steps[0].new_graphs[-1]
    assert "torch/optim/sgd.py" in second.diff_summary


def test_xla_cpu_generated_its_code_at_llvm_level_0(steady_run) -> None:
    """XLA's own dump of the options each module compiled with: the explorer's CPU default."""
    dump = Path(steady_run.graphs[0].hlo_path).parent
    options = sorted(dump.glob("*.debug_options"))
    assert len(options) >= len(steady_run.graphs)
    assert all("xla_backend_optimization_level: 0" in p.read_text() for p in options)


def test_step_json_has_exactly_the_issue_keys(steady_run) -> None:
    doc = steady_run.to_json()
    assert set(doc) == {"ok", "device", "steps", "graphs", "failure"}
    assert all(tuple(s) == STEP_KEYS for s in doc["steps"])
    assert doc["device"]["pjrt_device"] == "CPU" and doc["device"]["world_size"] == 1
    assert any("pin_layout_in_collective_ops=False" in w for w in doc["device"]["workarounds"])


def test_logging_is_a_recompile_explained_by_added_ops(logging_run) -> None:
    run = logging_run
    assert run.ok, run.failure
    step = run.steps[2]
    assert step.new_graphs and run.graph(step.new_graphs[-1]).recompile
    assert "added" in step.cause and "explorer/xla/runtime/steps.py" in step.cause
    assert step.diff_summary and "added" in step.diff_summary
    # the logged step's graph is cached from then on; the plain steps run the plain graph
    assert not run.steps[5].compiled and run.steps[5].graph_hash == step.graph_hash
    assert run.steps[3].graph_hash == run.steps[1].graph_hash != step.graph_hash


def test_scalar_is_a_recompile_explained_by_the_parameters(scalar_run) -> None:
    run = scalar_run
    step = run.steps[2]
    graph = run.graph(step.new_graphs[-1])
    assert graph.recompile
    assert step.num_parameters != run.steps[1].num_parameters
    assert "parameter count changed" in step.cause
    assert not run.steps[3].compiled and run.steps[3].graph_hash == run.steps[1].graph_hash


def test_forced_xla_abort_comes_back_as_a_structured_failure() -> None:
    """Bucketing without the CPU workaround makes torch_xla abort the child (SIGABRT)."""
    run = run_scenario("bucketed-nested", steps=2, layers=1, cpu_workarounds=False)
    assert not run.ok
    f = run.failure
    assert f.kind == "abort" and f.signal == "SIGABRT" and f.returncode == -6
    assert "Check failed: has_layout()" in f.message and f.step == 0
    assert run.to_json()["failure"]["message"] == f.message


def _write_step(tmp_path, body: str) -> str:
    path = tmp_path / "user_train.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def test_user_step_runs_with_the_same_capture_and_an_exception_keeps_earlier_steps(
    tmp_path,
) -> None:
    path = _write_step(
        tmp_path,
        """
        import torch, torch_xla
        w = torch.ones(4, 4).to(torch_xla.device())

        def step(i):
            global w
            if i == 3:
                raise ValueError("diverged at step 3")
            w = w @ w * 0.5 if i == 0 else w @ w * 0.25 + w
    """,
    )
    run = run_step(f"{path}:step", steps=5, live_report=0)
    assert [s.step for s in run.steps] == [0, 1, 2]
    assert (
        "aten::add" in run.steps[1].live_report
        and "location=step@user_train.py" in run.steps[1].live_report
    )
    assert run.steps[0].compiled and run.steps[1].compiled and not run.steps[2].compiled
    assert (
        run.failure.kind == "exception" and "ValueError: diverged at step 3" in run.failure.message
    )
    assert run.failure.step == 3


def test_user_step_that_cannot_be_loaded_is_bad_input(tmp_path) -> None:
    path = _write_step(tmp_path, "def other(i):\n    pass\n")
    with pytest.raises(InputError, match="has no attribute 'step'"):
        run_step(f"{path}:step", steps=2)


def test_a_hung_child_is_stopped_by_the_timeout(tmp_path) -> None:
    path = _write_step(tmp_path, "import time\n\ndef step(i):\n    time.sleep(120)\n")
    run = run_step(f"{path}:step", steps=2, timeout_s=15)
    assert run.failure.kind == "timeout" and "no result after 15 s" in run.failure.message
    # Where it stopped is what the child last said: step 0 once it began it, or setup where a
    # busy machine spent the 15 s importing torch_xla (the words for each: the fast tier).
    began = run.failure.step == 0
    assert ("stopped during step 0;" in run.failure.message) == began
    assert began or ("stopped during setup" in run.failure.message and run.steps == [])


def test_spmd_fsdp_v2_runs_on_four_virtual_cpu_devices() -> None:
    run = run_scenario("steady", steps=3, layers=1, fsdp="v2")
    assert run.ok, run.failure
    assert run.device["devices"] == 4 and run.device["spmd"]
    assert "SpmdFullyShardedDataParallel" in run.device["wrapper"]
    assert not run.steps[2].compiled and run.steps[2].graph_hash == run.steps[1].graph_hash
