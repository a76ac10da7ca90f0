"""Real runs on gloo/CPU: correct schedules are bitwise equal to the reference, the seed's fails where predicted."""

from __future__ import annotations

from collections import Counter

import pytest

from explorer.pipeline.analysis import check
from tests.pipeline.conftest import CORRECT, alive


@pytest.mark.slow
@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("name", [c[0] for c in CORRECT])
def test_correct_schedule_matches_reference_bitwise(correct_runs, stages, name):
    schedule, result = correct_runs[stages, name]
    assert result.failure is None and result.ok
    assert result.bitwise_equal_to_reference is True
    assert len(result.losses) == schedule.num_microbatches
    assert result.losses == result.details["result"]["reference_losses"]
    # Every instruction of every rank ran exactly once, and was timed.
    ran = Counter((r["rank"], r["step"], r["text"]) for r in result.records)
    expected = Counter(
        (r, t, str(i))
        for r in range(schedule.num_ranks)
        for t, step in enumerate(schedule.stream(r))
        for i in step
    )
    assert ran == expected
    assert all(r["end"] >= r["start"] >= 0 for r in result.records)
    # Every message recorded what it carried, and each matched its pair: no contract finding.
    exchanged = [r for r in result.records if r["instruction"].startswith(("Send", "Recv"))]
    assert exchanged and all(len(r["p2p"]) == 1 for r in exchanged)
    assert result.details["contract"] == []


@pytest.mark.slow
@pytest.mark.parametrize("stages", [2, 4])
def test_legacy_fixed_and_1f1b_are_bitwise_identical(correct_runs, stages):
    digests = {name: correct_runs[stages, name][1].digest for name, *_ in CORRECT}
    assert len(set(digests.values())) == 1 and None not in digests.values(), digests


@pytest.mark.slow
def test_seed_schedule_fails_at_the_predicted_stage_and_step(seed_bug_run):
    schedule, result = seed_bug_run
    predicted = min(check(schedule).findings.hazards, key=lambda h: (h.step, h.stage))
    assert not result.ok and result.losses == [] and result.bitwise_equal_to_reference is None
    failure = result.failure
    assert (failure.stage, failure.step, failure.instruction) == (
        predicted.stage,
        predicted.step,
        predicted.at.deepspeed_repr,
    )
    assert failure.rank == schedule.stage_to_rank[predicted.stage]
    assert "inputs[0].grad is None" in failure.message
    # The partial trace is kept: the failing rank's steps before the failure are on disk.
    steps = {r["step"] for r in result.records if r["rank"] == failure.rank}
    assert steps and max(steps) == failure.step  # RecvActivation of the failing step completed
    assert not any(alive(pid) for pid in result.pids.values())


@pytest.mark.slow
def test_transformer_matches_reference_bitwise(tmp_path):
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import ModelSpec, RunSpec, run_pipeline

    result = run_pipeline(
        RunSpec.for_schedule(build("deepspeed-train", 2, 4), model=ModelSpec("transformer")),
        tmp_path,
    )
    assert result.ok and result.bitwise_equal_to_reference is True
    assert len(result.losses) == 4 and all(loss > 0 for loss in result.losses)


@pytest.mark.slow
def test_silent_wrong_read_is_a_finding_at_the_predicted_step(tmp_path):
    """GPipe with 2 buffers instead of 4: the backward reads another micro-batch's output, silently in DeepSpeed."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import RunSpec, run_pipeline

    schedule = build("gpipe", 2, 4, buffers=2)
    predicted = min(check(schedule).findings.hazards, key=lambda h: (h.step, h.stage))
    result = run_pipeline(RunSpec.for_schedule(schedule), tmp_path)
    assert not result.ok
    assert (result.failure.stage, result.failure.step, result.failure.instruction) == (
        predicted.stage,
        predicted.step,
        predicted.at.deepspeed_repr,
    )
    assert "silently" in result.failure.message


@pytest.mark.slow  # reads a real run (correct_runs)
def test_a_crash_while_tearing_down_after_done_does_not_fail_a_finished_run(correct_runs):
    """A rank that recorded "done" had handed in its results; a signal at interpreter exit is noted, not blamed."""
    from explorer.pipeline.traces.result import collect

    schedule, result = correct_runs[4, "fixed"]
    codes = {0: 0, 1: -11, 2: 0, 3: 0}
    again = collect(result.folder, schedule, codes)
    assert again.ok and again.failure is None and again.digest == result.digest
    assert again.details["teardown_exit_codes"] == {1: -11}
