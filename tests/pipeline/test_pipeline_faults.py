"""Faults end a run promptly, name the rank, keep the partial trace and leave no process behind."""

from __future__ import annotations

import time

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import Fault, RunSpec, run_pipeline
from tests.pipeline.conftest import alive


def _timed(spec, folder, **kw):
    t0 = time.monotonic()
    result = run_pipeline(spec, folder, **kw)
    return result, time.monotonic() - t0


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill", "raise"])
def test_a_dying_rank_is_named_and_the_run_ends(tmp_path, how):
    schedule = build("deepspeed-train", 4, 8)
    seen = []  # each rank's state as the explorer's Run control is told it
    # A receive times out only after 120 s: a run that ends sooner ended by the death itself,
    # whatever the machine's load (an ordering, not a race against a short bound).
    result, took = _timed(
        RunSpec.for_schedule(schedule, fault=Fault(rank=1, step=5, how=how), stall_timeout_s=120),
        tmp_path,
        progress=lambda follower: seen.append({p.rank: p.state for p in follower.progress()}),
    )
    assert took < 120
    # Once the run ended no rank is said to be running; the killed rank wrote no end: stopped.
    final = seen[-1]
    assert sorted(final) == [0, 1, 2, 3] and set(final.values()) <= {"failed", "stopped"}, final
    assert final[1] == ("stopped" if how == "kill" else "failed")
    assert result.stopped_ranks() == tuple(r for r in range(4) if final[r] != "done")
    assert not result.ok and result.failure.rank == 1 and result.failure.stage == 1
    assert result.failure.step == 5
    assert ("SIGKILL" in result.failure.message) == (how == "kill")
    if how == "kill":
        assert (result.failure.kind, result.failure.signal) == ("killed", "SIGKILL")
    else:
        assert (result.failure.kind, result.failure.exception_type) == ("error", "RuntimeError")
        assert "fault injected on rank 1 at step 5" in result.failure.traceback_tail
    # what the others said after it is kept apart from the cause, never the cause itself
    assert all(not c.startswith("rank 1:") for c in result.failure.consequences)
    assert result.returncodes[1] == (-9 if how == "kill" else 1)
    # Partial trace: rank 1 recorded steps 0..4 before it died, the others more or less.
    assert {r["step"] for r in result.records if r["rank"] == 1} == {1, 2, 3, 4}
    assert len(result.pids) == 4 and not any(alive(pid) for pid in result.pids.values())


@pytest.mark.slow
def test_a_rank_stopped_by_a_signal_is_named_without_waiting_for_the_stall_timeout(tmp_path):
    """Rank 1 sends itself SIGSTOP at step 5 (a Ctrl-Z, a ``kill -STOP``): it stands frozen, and
    the run names it from its process state. The receives time out only after 120 s: a run that
    ends sooner ended by that naming (an ordering, not a race against a short bound)."""
    schedule = build("deepspeed-train", 4, 8)
    spec = RunSpec.for_schedule(
        schedule, fault=Fault(rank=1, step=5, how="stop"), stall_timeout_s=120
    )
    result, took = _timed(spec, tmp_path)
    assert took < 120
    failure = result.failure
    assert (failure.kind, failure.signal, failure.rank, failure.stage) == (
        "killed",
        "SIGSTOP",
        1,
        1,
    )
    assert failure.step == 5
    assert failure.message.startswith("rank 1 was stopped by a signal (SIGSTOP, SIGTSTP or Ctrl-Z")
    assert "timeout" not in failure.message and not failure.consequences
    assert not any(alive(pid) for pid in result.pids.values())
    # the folder keeps it: a later ``run --collect`` names the same rank
    from explorer.pipeline.runtime.run_folder import collected

    again = collected(tmp_path)
    assert (again.failure.rank, again.failure.signal) == (1, "SIGSTOP")


@pytest.mark.slow
def test_a_hanging_rank_ends_by_timeout_naming_the_waiting_stages(tmp_path):
    schedule = build("deepspeed-train", 4, 8)
    spec = RunSpec.for_schedule(
        schedule, fault=Fault(rank=1, step=5, how="hang"), stall_timeout_s=3
    )
    result, took = _timed(spec, tmp_path)
    # The verdict is the message (each waiting stage named by its own receive timeout, which
    # only a rank that is still alive can write); the bound is a hang back-stop.
    assert took < 300
    message = result.failure.message
    assert (
        message.startswith("stalled")
        and "stage 0 (rank 0) waited" in message
        and "stage 2 (rank 2) waited" in message
    )
    assert "rank 1 made no progress after step 4" in message
    assert "SIGSTOP" not in message  # a sleeping rank is slow from outside, never frozen
    assert not any(alive(pid) for pid in result.pids.values())
    # the stall failure carries the doctor's verdict on what the ranks wrote
    hang = result.to_dict()["hang"]
    assert (hang["kind"], hang["verdict"], hang["culprit"]) == ("hang", "waits-on", 1)
    assert {0, 2} <= set(hang["waiting"])
    assert hang["ranks"][1]["instruction"]["step"] == 5


def test_a_deadlocking_schedule_is_refused_before_launch(tmp_path):
    s = build("1f1b", 2, 4)
    blocking = s.replace(
        params={**s.params, "p2p": "blocking"}
    )  # PyTorch's order under DeepSpeed's blocking P2P
    result = run_pipeline(RunSpec.for_schedule(blocking), tmp_path)
    assert not result.launched and not result.ok and result.pids == {}
    assert (
        result.failure.message.startswith("refused before launch")
        and "deadlock" in result.failure.message
    )
    assert (result.failure.stage, result.failure.step) == (0, 1)
    assert not (tmp_path / "spec.json").exists()


@pytest.mark.slow
def test_a_deadlock_launched_anyway_stalls_and_times_out(tmp_path):
    s = build("1f1b", 2, 4)
    blocking = s.replace(params={**s.params, "p2p": "blocking"})
    result, took = _timed(
        RunSpec.for_schedule(blocking, stall_timeout_s=3), tmp_path, check_first=False
    )
    assert took < 300 and not result.ok  # a hang back-stop: the message is the verdict
    message = result.failure.message
    assert (
        "stalled" in message
        and "stage 0 (rank 0) waited in SendActivation(buffer_id=1) at step 1" in message
    )
    assert "stage 1 (rank 1) waited in SendGrad(buffer_id=0) at step 2" in message
