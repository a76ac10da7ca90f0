"""The trace: valid Chrome trace JSON read back by the explorer's reader, a table, costs, live following."""

from __future__ import annotations

import json
import numbers
from dataclasses import replace

import pytest

from explorer.pipeline.analysis import Costs, check
from explorer.pipeline.analysis.measured import makespan
from explorer.pipeline.analysis.recost import measured_costs
from explorer.pipeline.traces import read_chrome_trace
from explorer.pipeline.traces.follow import Follower


@pytest.mark.slow
def test_chrome_trace_is_valid_trace_event_json(correct_runs, tmp_path):
    schedule, result = correct_runs[4, "fixed"]
    path = result.write_chrome_trace(tmp_path / "trace.json")
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == len(schedule)
    for e in complete:  # the fields the Trace Event Format requires of complete events
        assert (
            isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        )
        assert (
            isinstance(e["ts"], numbers.Real)
            and isinstance(e["dur"], numbers.Real)
            and e["dur"] >= 0
        )
    names = {e["args"]["name"] for e in events if e["ph"] == "M"}
    assert {f"rank {r}" for r in range(4)} <= names and {f"stage {s}" for s in range(4)} <= names
    back = read_chrome_trace(path)
    assert len(back) == len(schedule)
    assert sorted(zip(back.stage.tolist(), back.kind.tolist(), back.microbatch.tolist())) == sorted(
        zip(schedule.stage.tolist(), schedule.kind.tolist(), schedule.microbatch.tolist())
    )


@pytest.mark.slow
def test_failed_run_trace_marks_the_failure(seed_bug_run):
    _, result = seed_bug_run
    events = result.chrome_trace()["traceEvents"]
    marks = [e for e in events if e["ph"] == "i"]
    assert len(marks) == 1 and marks[0]["pid"] == 2 and "inputs[0].grad is None" in marks[0]["name"]
    assert sum(e["ph"] == "X" for e in events) == len(result.records) > 0


@pytest.mark.slow
def test_table_and_measured_trace(correct_runs):
    schedule, result = correct_runs[2, "1f1b"]
    lines = result.table().splitlines()
    assert len(lines) == len(schedule) + 1 and "instruction" in lines[0]
    trace = result.trace()
    assert len(trace) == len(schedule) and set(trace.rank.tolist()) == {0, 1}


@pytest.mark.slow
def test_measured_costs_feed_the_simulator(correct_runs):
    schedule, result = correct_runs[4, "1f1b"]
    trace = result.trace()
    costs = measured_costs(trace)
    assert isinstance(costs, Costs) and costs.forward > 0 and costs.backward > 0 and costs.send > 0
    simulated = check(schedule, costs).timeline.makespan  # ms, from the measured costs
    free_exchanges = replace(costs, send=0.0, recv=0.0, p2p=0.0, rank_overrides=())
    assert (
        simulated > check(schedule, free_exchanges).timeline.makespan
    )  # time in send/recv calls is counted
    measured = makespan(trace) * 1e3
    assert simulated > 0 and measured > 0
    # A rank runs its instructions one after another: their durations fit inside the makespan.
    for rank in range(4):
        assert float((trace.end - trace.start)[trace.rank == rank].sum()) <= measured * 1e-3


def test_follower_reads_only_complete_lines(tmp_path):
    path = tmp_path / "rank0.jsonl"
    line = {
        "type": "instr",
        "iteration": 0,
        "rank": 0,
        "stage": 0,
        "step": 3,
        "instruction": "ForwardPass(buffer_id=0)",
        "text": "0F0b0",
        "microbatch": 0,
        "buffer": 0,
        "start": 0.5,
        "end": 0.75,
    }
    path.write_text(
        json.dumps({"type": "start", "rank": 0, "pid": 1, "stages": [0]})
        + "\n"
        + json.dumps(line)
        + "\n"
        + json.dumps(line)[:20]
    )
    follower = Follower(tmp_path)
    assert len(follower.poll()) == 1 and follower.ranks[0].last_step == 3
    with open(path, "a") as fh:
        fh.write(
            json.dumps(line)[20:]
            + "\n"
            + json.dumps({"type": "failure", "rank": 0, "message": "x"})
            + "\n"
        )
    assert len(follower.poll()) == 1 and follower.ranks[0].state == "failed"
    assert follower.poll() == [] and len(follower.trace()) == 2


@pytest.mark.parametrize(
    "line, words",
    [
        ("not json at all", "line 2 is not JSON"),
        ('{"type": "instr", "rank": 0, "run": "r"}', "without integer iteration, stage, step"),
        ('{"type": "instr", "rank": 0, "iteration": 0, "stage": 0, "step": 0, "start": 1e400, '
         '"end": 1}', "has start=inf"),
        ('{"type": "start", "rank": 0, "pid": NaN}', "NaN is not a JSON number"),
        ('[1, 2]', "is not a record the ranks write"),
        ('{"type": "start", "rank": true}', "is not a record the ranks write"),
    ],
    ids=["garbage", "instr-without-fields", "overflowing-time", "nan", "not-an-object", "bool-rank"],
)  # fmt: skip
def test_a_damaged_line_is_one_input_error_naming_file_and_line(tmp_path, line, words):
    """Not a KeyError or JSONDecodeError from deep inside a reader or a live figure."""
    from explorer.errors import InputError

    start = json.dumps({"type": "start", "rank": 0, "pid": 1, "stages": [0]})
    (tmp_path / "rank0.jsonl").write_text(f"{start}\n{line}\n")
    with pytest.raises(InputError) as err:
        Follower(tmp_path).poll()
    assert str(err.value).startswith("rank0.jsonl line 2") and words in str(err.value)
    assert "\n" not in str(err.value)


def test_a_stall_names_a_rank_whose_neighbour_ended_before_its_own_timeout(tmp_path):
    """On a busy machine rank 1 reaches its blocking send late: rank 0 times out and exits
    first, and rank 1's send fails on the closed connection. It waited there all the same."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.traces.result import collect

    def failure(rank, kind, stage, step, instruction):
        return {"type": "failure", "rank": rank, "kind": kind, "message": f"{kind} on {rank}",
                "stage": stage, "step": step, "instruction": instruction, "time": float(rank)}  # fmt: skip

    lines = {
        0: failure(0, "timeout", 0, 1, "SendActivation(buffer_id=1)"),
        1: failure(1, "peer", 1, 2, "SendGrad(buffer_id=0)"),
    }
    for rank, line in lines.items():
        start = {"type": "start", "rank": rank, "pid": 10 + rank, "stages": [rank]}
        (tmp_path / f"rank{rank}.jsonl").write_text(f"{json.dumps(start)}\n{json.dumps(line)}\n")
    result = collect(tmp_path, build("1f1b", 2, 4), returncodes={0: 1, 1: 1}, stall_timeout_s=3)
    message = result.failure.message
    assert message.startswith("stalled: more than 3 s: stage 0 (rank 0) waited in SendActivation")
    assert (
        "stage 1 (rank 1) waited in SendGrad(buffer_id=0) at step 2 until its neighbour's "
        "process ended" in message
    )


def test_ranks_the_launcher_stopped_before_any_word_make_a_failure(tmp_path):
    """Ranks that wrote nothing (still starting on a busy machine when the launcher gave up on
    them) and were killed by it: the run failed, and says so. It once came back with no
    failure at all, as if nothing had gone wrong."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.traces.result import collect

    for rank in (0, 1):
        start = {"type": "start", "rank": rank, "pid": 10 + rank, "stages": [rank]}
        (tmp_path / f"rank{rank}.jsonl").write_text(json.dumps(start) + "\n")
    result = collect(
        tmp_path, build("1f1b", 2, 4), returncodes={0: -9, 1: -9}, stopped=frozenset({0, 1})
    )
    assert not result.ok and result.failure is not None
    assert result.failure.kind == "unfinished"
    assert result.failure.message.startswith("the launcher stopped ranks 0, 1 before they finished")
    assert (result.failure.rank, result.failure.step) == (0, 0)


def _peer_lost_by(tmp_path, rank: int) -> None:
    """Rank files of a 2-rank run: ``rank`` wrote its start line and lost its peer."""
    for r in (0, 1):
        lines = [{"type": "start", "rank": r, "pid": 10 + r, "stages": [r]}]
        if r == rank:
            lines.append(
                {"type": "failure", "rank": r, "kind": "peer", "time": 5.0, "stage": r,
                 "step": 2, "message": "RuntimeError: Connection closed by peer"}
            )  # fmt: skip
        (tmp_path / f"rank{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def test_a_lost_peer_is_the_consequence_of_the_rank_that_went_without_a_word(tmp_path):
    """Rank 1 exited non-zero without a report and rank 0 lost it: rank 1 is the cause, rank 0's
    lost peer a consequence (a lost peer was reported as the cause). With no exit code kept it
    is still rank 1; a rank the launcher stopped itself is a consequence, not a cause."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.traces.result import collect

    schedule = build("1f1b", 2, 4)
    _peer_lost_by(tmp_path, 0)
    exited = collect(tmp_path, schedule, returncodes={0: 1, 1: 3}).failure
    assert exited is not None and (exited.kind, exited.rank, exited.returncode) == ("exit", 1, 3)
    assert exited.consequences == ("rank 0: RuntimeError: Connection closed by peer",)
    unknown = collect(tmp_path, schedule).failure  # read back: no exit codes were kept
    assert unknown is not None and (unknown.kind, unknown.rank) == ("unfinished", 1)
    assert "no exit code is known" in unknown.message
    stopped = collect(tmp_path, schedule, returncodes={0: 1, 1: -9}, stopped=frozenset({1}))
    assert stopped.failure is not None and (stopped.failure.kind, stopped.failure.rank) == (
        "peer",
        0,
    )
