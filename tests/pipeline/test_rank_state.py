"""One definition of a rank's state, used by the progress bars, the breakdown, the grid's words and
``explorer read``: a rank that wrote no end is ``stopped``, not running, once another rank failed or
the job ended.

In notebook 06, ranks 1-3 wrote DeepSpeed's failure and torchrun killed rank 0 silently: the live
view said rank 0 was "running" for 50 s after the teardown, and ``explorer read`` said the same
after ``job.wait()``. Pure logic here; the real jobs are in ``tests/deepspeed/test_live_follow.py``
and ``tests/pipeline/test_pipeline_faults.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from explorer.pipeline.analysis.breakdown import breakdown
from explorer.pipeline.analysis.instrumented import instrumented_document
from explorer.pipeline.traces.follow import (
    Follower,
    job_state,
    rank_state,
    rank_states,
    ranks_in,
)
from explorer.pipeline.traces.result import PipelineRunResult


@pytest.mark.parametrize(
    "own, peer_failed, job_ended, state",
    [
        ("running", False, False, "running"),
        ("starting", False, False, "starting"),
        ("running", True, False, "stopped"),  # a neighbour failed: torchrun tears it down
        ("starting", True, False, "stopped"),
        ("running", False, True, "stopped"),  # the launcher exited: nothing runs any more
        ("starting", False, True, "stopped"),
        ("done", True, True, "done"),  # what a rank wrote of itself stands
        ("failed", False, True, "failed"),
        ("failed", True, False, "failed"),
    ],
)
def test_a_rank_that_wrote_no_end_is_stopped_once_a_peer_failed_or_the_job_ended(
    own, peer_failed, job_ended, state
):
    assert rank_state(own, peer_failed=peer_failed, job_ended=job_ended) == state


def test_the_notebook_06_job_after_rank_2_failed():
    own = {0: "running", 1: "failed", 2: "failed", 3: "failed"}
    states = rank_states(own)
    assert states == {0: "stopped", 1: "failed", 2: "failed", 3: "failed"}
    assert job_state(states) == "failed"
    assert (ranks_in(states, "failed"), ranks_in(states, "stopped")) == ([1, 2, 3], [0])


def test_a_rank_own_failure_is_not_a_peer_failure_for_itself():
    states = rank_states({0: "failed", 1: "running"})
    assert states == {0: "failed", 1: "stopped"}
    assert rank_states({0: "failed"}) == {0: "failed"}


def test_silence_alone_is_not_an_end():
    """Between two instructions a rank writes nothing: while no rank failed and the launcher runs,
    it is running; ranks that finished do not make the others stopped."""
    states = rank_states({0: "done", 1: "done", 2: "running"})
    assert states == {0: "done", 1: "done", 2: "running"} and job_state(states) == "running"
    ended = rank_states({0: "done", 1: "done", 2: "running"}, job_ended=True)
    assert ended[2] == "stopped" and job_state(ended) == "stopped"
    assert job_state(rank_states({0: "done", 1: "done"}, job_ended=True)) == "finished"
    assert job_state({}) == "running"


def _line(path: Path, **fields) -> None:
    with open(path, "a") as fh:
        fh.write(json.dumps(fields) + "\n")


def test_the_follower_says_the_states_from_the_files(tmp_path):
    for rank in range(3):
        _line(tmp_path / f"rank{rank}.jsonl", type="start", rank=rank, pid=100 + rank)
    follower = Follower(tmp_path)
    follower.poll()
    assert [p.state for p in follower.progress()] == ["running"] * 3
    _line(tmp_path / "rank1.jsonl", type="failure", rank=1, message="boom")
    follower.poll()
    assert [p.state for p in follower.progress()] == ["stopped", "failed", "stopped"]
    assert follower.ranks[0].state == "running"  # the rank's own lines are kept as they were
    assert follower.states() == {0: "stopped", 1: "failed", 2: "stopped"}


def test_the_follower_says_stopped_once_told_the_job_ended(tmp_path):
    _line(tmp_path / "rank0.jsonl", type="start", rank=0, pid=1)
    _line(tmp_path / "rank1.jsonl", type="start", rank=1, pid=2)
    _line(tmp_path / "rank1.jsonl", type="done", rank=1)
    follower = Follower(tmp_path)
    follower.poll()
    assert follower.states() == {0: "running", 1: "done"}
    follower.job_ended = True
    assert follower.states() == {0: "stopped", 1: "done"}


def test_a_finished_run_result_names_the_stopped_ranks_by_the_same_definition():
    result = PipelineRunResult(
        False,
        [],
        None,
        None,
        [],
        returncodes={0: -9, 1: 1, 2: 0, 3: -15},
        details={"failures": [{"rank": 1}], "finished": [2]},
    )
    assert result.rank_states() == {0: "stopped", 1: "failed", 2: "done", 3: "stopped"}
    assert result.stopped_ranks() == (0, 1, 3)


def test_the_breakdown_names_every_rank_it_was_told_stopped():
    """Rank 3 failed last: it has no time after its end, yet it stopped with the others. The
    sentence said "ranks 0, 1, 2 stopped early" while the progress said ranks 1-3 failed."""
    rank = np.array([0, 1, 2, 3])
    start = np.array([0.0, 0.0, 0.0, 0.0])
    end = np.array([0.1, 0.5, 0.7, 1.0])
    kind = np.zeros(4, dtype=np.int64)
    parts = breakdown(rank, kind, start, end, np.full(4, -1), stopped=(0, 1, 2, 3))
    assert parts.stopped == (0, 1, 2, 3)
    assert parts.seconds[3]["stopped"] == 0.0
    assert "ranks 0, 1, 2, 3 stopped early" in parts.sentence()
    only = breakdown(rank, kind, start, end, np.full(4, -1), stopped=(3, 9))
    assert only.stopped == (3,) and "; rank 3 stopped early" in only.sentence()
    assert "stopped early" not in breakdown(rank, kind, start, end, np.full(4, -1)).sentence()


def _instrumented(folder: Path, host: str, pids: dict, ends: dict) -> None:
    """A folder as ``explorer.instrument`` writes it: each rank's ``start`` line, and an end."""
    for rank, pid in pids.items():
        _line(
            folder / f"rank{rank}.jsonl",
            type="start",
            rank=rank,
            run="job",
            pid=pid,
            host=host,
            stages=[rank],
            source="deepspeed",
            num_stages=len(pids),
            unix=1.0,
        )
        if rank in ends:
            _line(folder / f"rank{rank}.jsonl", type=ends[rank], rank=rank, run="job", message="x")


def test_a_job_whose_silent_ranks_processes_are_gone_has_ended(tmp_path):
    """torchrun killed with its ranks writes nothing: the ranks' processes, named with their host
    on their start lines, are how a reader knows (``explorer read`` after the fact)."""
    from explorer.pipeline.traces.instrumented import read_instrumented

    _instrumented(tmp_path, "here", {0: 10, 1: 11, 2: 12}, {2: "done"})
    gone = set()

    def alive(pid: int) -> bool:
        return pid not in gone

    run = read_instrumented(tmp_path)
    assert not run.end_if_gone(alive, "here") and run.state == "running"
    gone.add(10)
    assert not run.end_if_gone(alive, "here")  # rank 1 still runs
    gone.add(11)
    assert not run.end_if_gone(alive, "elsewhere")  # not this machine's processes: unknown
    assert run.end_if_gone(alive, "here")
    assert [r["state"] for r in run.ranks()] == ["stopped", "stopped", "done"]
    assert run.state == "stopped" and instrumented_document(run)["state"] == "stopped"


def test_a_folder_without_hosts_or_with_missing_ranks_is_never_said_ended(tmp_path):
    from explorer.pipeline.traces.instrumented import read_instrumented

    _instrumented(tmp_path, None, {0: 10, 1: 11}, {})
    assert not read_instrumented(tmp_path).end_if_gone(lambda pid: False, "here")
    other = tmp_path / "other"
    other.mkdir()
    _instrumented(other, "here", {0: 10, 1: 11}, {})
    (other / "rank1.jsonl").unlink()  # rank 1 has not started yet
    assert not read_instrumented(other).end_if_gone(lambda pid: False, "here")


def test_process_alive_knows_this_process_and_a_pid_that_cannot_exist():
    from explorer.processes.ranks import process_alive

    assert process_alive(os.getpid())
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    assert not process_alive(pid_max + 1)
