"""Every preset under real torch.compile on this machine's default backend, diagnosed from Dynamo's records.

The default backend is inductor where a C++ compiler exists (it does on the project's CPU
machines), aot_eager otherwise; each preset is run once per session and shared by its tests.
"""

from __future__ import annotations

import importlib.util

import pytest

from explorer.compile.runtime import default_backend, run_scenario
from explorer.compile.traces.records import EAGER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def results():
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = run_scenario(name)
        return cache[name]

    return get


def test_cycling_is_period_three_cycling_not_recompiles(results) -> None:
    r = results("cycling")
    assert r.error is None and r.backend == default_backend("cpu")
    assert (r.diagnosis.cause, r.diagnosis.period) == ("cycling", 3), r.diagnosis.sentence
    assert [c.compile_id for c in r.compiles] == ["0/0", "0/1", "0/2"]
    assert [c.iteration for c in r.compiles] == [0, 1, 2]
    assert "mode == 0" in r.compiles[1].guard and "mode == 1" in r.compiles[2].guard
    assert [it.variant for it in r.iterations] == [f"0/{i % 3}" for i in range(len(r.iterations))]
    assert not any(it.compiled for it in r.iterations[3:])
    guards = {v.compile_id: v.only_here for v in r.guards}
    assert any("mode == 2" in g for g in guards["0/2"]) and not any(
        "mode == 2" in g for g in guards["0/0"]
    )


def test_shapes_recompiles_every_three_on_the_size_guard(results) -> None:
    r = results("shapes")
    assert (r.diagnosis.cause, r.diagnosis.period) == ("recompiles", 3), r.diagnosis.sentence
    assert [c.iteration for c in r.compiles] == list(range(0, len(r.iterations), 3))
    assert all("size" in c.guard for c in r.compiles[1:]), [c.guard for c in r.compiles]


def test_graph_break_is_recorded_with_its_reason_and_resume_frame(results) -> None:
    r = results("graph-break")
    assert r.graph_breaks and "disable" in r.graph_breaks[0].reason
    frames = {c.frame for c in r.compiles}
    assert len(frames) == 2, "the resume function after the break compiles as its own frame"
    assert all(len(it.variants) == 2 for it in r.iterations)
    assert r.diagnosis.cause == "steady"


def test_zero3_hooks_break_the_graph_and_nothing_compiled_runs(results) -> None:
    r = results("zero3-hooks")
    assert any("disable" in g.reason for g in r.graph_breaks)
    assert not any(it.variants for it in r.iterations)
    assert "ran eagerly" in r.diagnosis.sentence


def test_presets_run_on_one_intra_op_thread_and_give_the_count_back(results) -> None:
    """One thread makes an iteration's own time exact on a busy machine (see one_intra_op_thread)."""
    import torch

    before = torch.get_num_threads()
    r = results("graph-break")
    assert r.threads == 1 and r.to_json()["threads"] == 1
    assert torch.get_num_threads() == before


def test_limit_falls_back_to_eager_with_period_six(results) -> None:
    r = results("limit")
    assert (r.diagnosis.cause, r.diagnosis.period) == ("eager-fallback", 6), r.diagnosis.sentence
    failed = [c for c in r.compiles if c.failed]
    assert [c.iteration for c in failed][:1] == [4] and failed[0].failed == "RecompileLimitExceeded"
    assert [it.fallback for it in r.iterations[6:12]] == [False] * 4 + [True] * 2
    assert r.iterations[10].variant == EAGER


def test_accumulation_is_periodic_work_unrelated_to_compile(results) -> None:
    """Time-only evidence, read from each iteration's own time: a busy machine's waits for a core are not in it."""
    r = results("accumulation")
    assert all(it.waited_ms is not None and it.cpu_ms is not None for it in r.iterations)
    assert (r.diagnosis.cause, r.diagnosis.period) == ("unrelated", 3), r.diagnosis.sentence
    assert len(r.compiles) == 1 and "iteration % 3 == 2" in r.diagnosis.sentence


def test_probe_leaves_dynamo_config_as_it_found_it(results) -> None:
    import torch._dynamo

    before = torch._dynamo.config.recompile_limit
    results("limit")
    assert torch._dynamo.config.recompile_limit == before


@pytest.mark.process_group
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)
def test_deepspeed_engine_compile_cycles_with_period_three() -> None:
    r = run_scenario("deepspeed", backend="aot_eager")
    assert r.error is None, r.failure
    assert (r.diagnosis.cause, r.diagnosis.period) == ("cycling", 3), r.diagnosis.sentence
    assert len({it.variant for it in r.iterations}) == 3


@pytest.mark.process_group
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)
def test_the_deepspeed_preset_runs_again_in_the_same_process() -> None:
    """A kernel re-running the cell: DeepSpeed caches its groups process-wide, so the preset
    keeps the one group it started and the second run reuses it."""
    import torch.distributed as dist

    for _ in range(2):
        r = run_scenario("deepspeed", iterations=3, backend="aot_eager")
        assert r.error is None, r.failure
        assert dist.is_initialized() and dist.get_world_size() == 1
