"""``JobFollower`` says a silent job is stalled, diagnoses it once per stall, pins the verdict.

The run is a recorded shape (no torchrun) and the clock is injected: what is checked is the
widget's use of the stall rule and of the doctor's verdict, not the doctor itself (that is
tests/deepspeed/test_stalled_job.py, on a real hung job).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import explorer.pipeline.app.job_follower as job_follower
from explorer.errors import InputError
from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.hang import RankState, diagnose, first_row_of_step, placed
from explorer.pipeline.app.job_follower import JobFollower
from explorer.pipeline.runtime.doctor import Diagnosis
from explorer.pipeline.traces.follow import Follower

SCHEDULE = build("deepspeed-train", 2, 4)
#: Rank 0's first instruction, as its trace line says it.
_FIRST = SCHEDULE.stream(0)[0][0]
FIRST = {
    "iteration": 0, "rank": 0, "stage": 0, "step": 0, "text": str(_FIRST),
    "microbatch": _FIRST.microbatch, "start": 0.0, "end": 0.001,
}  # fmt: skip


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _run() -> SimpleNamespace:
    """Two ranks running; ``write()`` appends a record as a rank would (read at the next poll)."""
    follower = SimpleNamespace(records=[], events=[], job_ended=False, folder="job")
    follower.trace = lambda iteration=None: Follower.trace(follower, iteration)  # the real reading
    written: list[dict] = []

    def poll() -> list[dict]:
        new = written[:]
        written.clear()
        follower.records.extend(new)
        return new

    return SimpleNamespace(
        schedule=lambda: SCHEDULE,
        ranks=lambda: [
            {"rank": r, "state": "running", "iteration": 0, "last_step": 1} for r in (0, 1)
        ],
        follower=follower,
        poll=poll,
        end_if_gone=lambda *a: False,
        failure=lambda: None,
        finished=False,
        version="0.19.8",
        run_id="job",
        write=lambda: written.append(dict(FIRST)),
    )


#: A launcher still running (a ``Popen`` as the follower uses it: ``pid`` and ``poll()``).
LAUNCHER = SimpleNamespace(pid=4242, poll=lambda: None)


def _follower(**kw) -> tuple[JobFollower, Clock, SimpleNamespace]:
    clock = Clock()
    follower = JobFollower("unused", clock=clock, **kw)
    follower.run = run = _run()
    return follower, clock, run


def _verdict():
    """Rank 0 waits on rank 1, which sleeps in its forward of micro-batch 1."""
    at0, mb0 = placed(SCHEDULE, first_row_of_step(SCHEDULE, 0, 3))
    at1, mb1 = placed(SCHEDULE, first_row_of_step(SCHEDULE, 1, 3))
    return diagnose(
        [
            RankState(0, 10, "waiting", op="recv", peer=1, at=at0, microbatch=mb0),
            RankState(1, 11, "sleeping", at=at1, microbatch=mb1, where="train.py:7"),
        ]
    )


def _on_its_way():
    """Rank 1 sleeps; rank 0 is still running toward its wait (a moment, not the hang)."""
    at1, mb1 = placed(SCHEDULE, first_row_of_step(SCHEDULE, 1, 3))
    return diagnose(
        [
            RankState(0, 10, "computing"),
            RankState(1, 11, "sleeping", at=at1, microbatch=mb1, where="train.py:7"),
        ]
    )


def _doctor_that_looks_early(calls: list, clock=None):
    """The doctor's first look catches rank 0 on its way; later looks find the hang (``clock``:
    the first look takes 10 s of it)."""

    def doctor(pids, folder, schedule=None):
        calls.append(pids)
        if len(calls) == 1 and clock is not None:
            clock.now += 10.0
        return Diagnosis(_on_its_way() if len(calls) == 1 else _verdict(), None, "", 0.1, 2)

    return doctor


def test_an_unsettled_verdict_is_looked_at_again_a_stall_time_later_then_kept(monkeypatch):
    assert _on_its_way().verdict in job_follower.UNSETTLED and _verdict().verdict == "waits-on"
    calls: list = []
    monkeypatch.setattr(job_follower, "doctor", _doctor_that_looks_early(calls))
    follower, clock, run = _follower(stall_after_s=5.0, job=LAUNCHER)
    run.write()
    follower.poll()
    clock.now = 6.0
    follower.poll()
    assert len(calls) == 1 and "diagnosis: no rank waits" in follower.status.value
    clock.now = 10.9  # not yet a stall time after the first look
    follower.poll()
    assert len(calls) == 1
    clock.now = 11.0
    follower.poll()
    assert len(calls) == 2 and "diagnosis: rank 0 waits on rank 1" in follower.status.value
    for now in (30.0, 60.0, 90.0):  # settled: not looked at again while the stall lasts
        clock.now = now
        follower.poll()
    assert len(calls) == 2


def test_a_verdict_that_stays_unsettled_is_looked_at_a_bounded_number_of_times(monkeypatch):
    calls: list = []

    def doctor(pids, folder, schedule=None):
        calls.append(pids)
        return Diagnosis(_on_its_way(), None, "", 0.1, 2)

    monkeypatch.setattr(job_follower, "doctor", doctor)
    follower, clock, run = _follower(stall_after_s=5.0, job=LAUNCHER)
    run.write()
    follower.poll()
    for now in range(6, 100):
        clock.now = float(now)
        follower.poll()
    assert len(calls) == 1 + job_follower.AUTO_RETRIES
    run.write()  # it moves, then stops again: a new stall, looked at afresh
    follower.poll()
    clock.now = 120.0
    follower.poll()
    assert len(calls) == 2 + job_follower.AUTO_RETRIES


def test_waiting_for_the_diagnosis_waits_past_an_unsettled_one(monkeypatch):
    """A notebook cell prints what ``wait_for_diagnosis`` returns: the hang, not the moment
    before it that the first look caught."""
    calls: list = []
    follower, clock, run = _follower(stall_after_s=5.0, job=LAUNCHER)
    monkeypatch.setattr(job_follower, "doctor", _doctor_that_looks_early(calls, clock))
    run.write()
    follower.poll()
    clock.now = 6.0
    follower.start()
    try:
        diagnosis = follower.wait_for_diagnosis(timeout_s=60)
    finally:
        follower.stop()
    assert len(calls) == 2
    assert diagnosis is not None and (diagnosis.verdict.verdict, diagnosis.verdict.culprit) == (
        "waits-on",
        1,
    )


def test_a_silent_job_is_stalled_after_the_stall_time_and_running_again_once_it_writes():
    follower, clock, run = _follower(stall_after_s=5.0, auto_diagnose=False)
    run.write()
    assert follower.poll()
    assert "(running)" in follower.status.value
    clock.now = 4.0
    assert not follower.poll() and "(running)" in follower.status.value
    clock.now = 42.7
    assert follower.poll()
    assert "(stalled for 42 s)" in follower.status.value
    assert "press diagnose" in follower.status.value
    assert follower.history[-1]["stalled_s"] == 42.7
    clock.now = 43.0
    run.write()
    assert follower.poll() and "(running)" in follower.status.value
    assert follower.stalled_s is None


def test_the_default_stall_time_follows_the_jobs_rhythm():
    follower, clock, run = _follower(auto_diagnose=False)
    run.write()
    follower.poll()
    clock.now = 8.0  # a silence of 8 s that ended: the job's rhythm
    run.write()
    follower.poll()
    clock.now = 8.0 + 39.0
    follower.poll()
    assert "(running)" in follower.status.value  # 39 s < 5 x 8 s
    clock.now = 8.0 + 41.0
    follower.poll()
    assert "(stalled for 41 s)" in follower.status.value


def test_a_stall_is_diagnosed_once_by_itself_and_the_verdict_pinned_on_the_grid(monkeypatch):
    calls = []

    def doctor(pids, folder, schedule=None):
        calls.append((pids, schedule))
        return Diagnosis(_verdict(), None, "", 0.1, 2)

    monkeypatch.setattr(job_follower, "doctor", doctor)
    follower, clock, run = _follower(stall_after_s=5.0, job=LAUNCHER)
    run.write()
    follower.poll()
    for now in (6.0, 7.0, 8.0):
        clock.now = now
        follower.poll()
    assert calls == [([4242], SCHEDULE)]  # once for this stall, on the job's process
    status = follower.status.value
    assert "diagnosis: rank 0 waits on rank 1: stage 1 (rank 1) sleeps at train.py:7" in status
    grid = follower.grid.figure.to_dict()
    pinned = next(t for t in grid["data"] if t.get("name") == "hang")
    assert set(zip(pinned["y"], pinned["x"])) == {(0, 3), (1, 3)}
    assert len(grid["layout"]["annotations"]) == 1  # rank 0's wait on rank 1, as an arrow
    follower.stop()  # the user stops following: the verdict stays on the grid
    assert "hang" in [t.get("name") for t in follower.grid.figure.to_dict()["data"]]
    follower.stopped, follower.run.follower.job_ended = False, False
    run.write()  # it moves again: the verdict is no longer pinned
    follower.poll()
    assert "hang" not in [t.get("name") for t in follower.grid.figure.to_dict()["data"]]
    clock.now = 20.0
    follower.poll()
    assert len(calls) == 2  # then it stops again: a new stall, a new diagnosis


def test_a_diagnosis_that_cannot_be_made_is_said_and_the_follower_goes_on(monkeypatch):
    def doctor(pids, folder, schedule=None):
        raise InputError("no process 4242 is running: give the PID of a running job")

    monkeypatch.setattr(job_follower, "doctor", doctor)
    follower, clock, run = _follower(stall_after_s=5.0, job=LAUNCHER)
    run.write()
    follower.poll()
    clock.now = 10.0
    assert follower.poll()
    assert follower.diagnose() is None
    assert "could not diagnose: InputError: no process 4242" in follower.status.value


def test_the_button_diagnoses_a_job_that_still_moves_and_says_it_until_it_moves(monkeypatch):
    monkeypatch.setattr(
        job_follower,
        "doctor",
        lambda pids, folder, schedule=None: Diagnosis(_verdict(), None, "", 0.1, 2),
    )
    follower, clock, run = _follower(job=LAUNCHER)
    run.write()
    follower.poll()
    follower.diagnose_button.click()  # in a thread: the kernel is not held
    deadline = time.monotonic() + 30
    while "diagnosis:" not in follower.status.value and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (
        "(running)" in follower.status.value and "diagnosis: rank 0 wait" in follower.status.value
    )
    clock.now = 1.0
    run.write()
    follower.poll()
    assert "diagnosis:" not in follower.status.value


def test_a_wait_for_cycle_is_drawn_as_its_loop_between_the_cells_that_wait():
    from explorer.pipeline.analysis import check
    from explorer.pipeline.views.live import verdict_cells, verdict_grid

    s = build("1f1b", 2, 4)
    blocking = s.replace(params={**s.params, "p2p": "blocking"})
    deadlock = check(blocking, other_model=False).findings.deadlock
    assert deadlock is not None
    at = {w.at.rank: w.at for w in deadlock.cycle}
    verdict = diagnose(
        [RankState(r, None, "waiting", op="send", peer=1 - r, at=at[r]) for r in (0, 1)],
        "blocking",
    )
    assert verdict.verdict == "cycle"
    cells = verdict_cells(verdict)
    assert cells == {r: (at[r].stage, at[r].step) for r in (0, 1)}
    fig = verdict_grid(check(blocking, other_model=False), verdict).to_dict()
    arrows = {((a["ay"], a["ax"]), (a["y"], a["x"])) for a in fig["layout"]["annotations"]}
    assert arrows == {(cells[0], cells[1]), (cells[1], cells[0])}  # each waits on the other
    assert "HUNG: wait-for cycle" in fig["layout"]["title"]["text"]


def test_whoever_sees_the_diagnosis_sees_the_grid_that_shows_it(monkeypatch):
    """A notebook cell waits for the diagnosis in another thread, then shows the grid: the
    verdict must be on the grid before the diagnosis is published, not a moment after."""
    monkeypatch.setattr(
        job_follower,
        "doctor",
        lambda pids, folder, schedule=None: Diagnosis(_verdict(), None, "", 0.1, 2),
    )
    follower, clock, run = _follower(job=LAUNCHER, auto_diagnose=False)
    run.write()
    follower.poll()
    published_at_show: list[object] = []
    show = follower.grid.show

    def spying_show(figure):
        published_at_show.append(follower.diagnosis)
        show(figure)

    monkeypatch.setattr(follower.grid, "show", spying_show)
    follower.diagnose_button.click()
    diagnosis = follower.wait_for_diagnosis(timeout_s=30)
    assert diagnosis is not None and diagnosis.verdict.culprit == 1
    assert published_at_show == [None]  # pinned while the diagnosis was not yet out
    assert "HUNG: rank 0 waits on rank 1" in follower.grid.figure.layout.title.text
    clock.now = 1.0
    run.write()  # it moved: a new wait is for a diagnosis made after this
    follower.poll()
    assert follower.wait_for_diagnosis(timeout_s=0.05) is None  # not the one from before


def test_waiting_for_a_diagnosis_ends_when_the_following_ends():
    follower, clock, run = _follower(job=SimpleNamespace(pid=4242, poll=lambda: 0))
    run.write()
    follower.start()  # the launcher has exited: the thread reads the rest and ends
    assert follower.wait_for_diagnosis(timeout_s=30) is None
    assert follower._thread is not None
    follower._thread.join(timeout=30)
    assert not follower._thread.is_alive()


def test_a_job_that_ended_is_diagnosed_from_what_its_ranks_wrote(monkeypatch):
    """The diagnose button on a job whose launcher has exited: no process is left to read, so
    the doctor reads the run folder alone (its ``pids`` empty), not the dead launcher's PID."""
    calls = []

    def doctor(pids, folder, schedule=None):
        calls.append(list(pids))
        return Diagnosis(_verdict(), None, "", 0.1, 0)

    monkeypatch.setattr(job_follower, "doctor", doctor)
    ended = SimpleNamespace(pid=4242, poll=lambda: 0)
    follower, clock, run = _follower(job=ended, auto_diagnose=False)
    run.write()
    follower.poll()
    assert follower.diagnose() is not None
    assert calls == [[]]
    assert _follower(job=LAUNCHER)[0].pids() == [4242]  # a job still running: its process
