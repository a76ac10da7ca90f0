"""Where a rank's recorded order left the plan: the seed's DeepSpeed order checked against the fix.

The explorer's engine runs DeepSpeed's training schedule in 0.8.1's order (the seed: each stage
receives the next activation before it sends the gradient) and fails at stage 2, step 6, as
DeepSpeed did. Against its own plan every rank kept to it; against the fixed order (the gradient
first), ``explorer doctor FOLDER --kind ... --order fixed`` names where each rank left it.
"""

from __future__ import annotations

import json
import shutil

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.departure import departures
from explorer.pipeline.runtime.doctor import doctor

SIZE = ["--kind", "deepspeed-train", "--stages", "4", "--microbatches", "8", "--buffers", "fixed"]


def _records(schedule, cut: dict[int, int]) -> list[dict]:
    """Each rank's stream as records, rank ``r`` stopping after ``cut[r]`` instructions."""
    out = []
    for rank in range(schedule.num_ranks):
        stream = [ins for instrs in schedule.stream(rank) for ins in instrs]
        for i, ins in enumerate(stream[: cut.get(rank, len(stream))]):
            out.append({"rank": rank, "iteration": 0, "text": str(ins), "start": float(i)})
    return out


def test_a_rank_that_stopped_early_kept_to_the_plan_and_one_that_swapped_did_not():
    plan = build("deepspeed-train", 2, 4)
    records = _records(plan, {1: 3})  # rank 1 stopped (or is still running): not a departure
    assert departures(plan, records) == []
    mine = [r for r in records if r["rank"] == 0]
    mine[4], mine[5] = mine[5], mine[4]  # two instructions swapped
    (left,) = departures(plan, mine)
    assert (left.rank, left.position, str(left.ran), str(left.planned)) == (
        0,
        4,
        mine[4]["text"],
        mine[5]["text"],
    )
    assert left.sentence().startswith(f"rank 0 left the plan at step {left.step}: it ran ")
    full = _records(plan, {})
    extra = [*full, {"rank": 1, "iteration": 0, "text": full[0]["text"], "start": 99.0}]
    (past,) = departures(plan, extra)
    assert past.planned is None and past.sentence().endswith("after the plan's last instruction")


def test_the_same_order_in_other_buffer_slots_keeps_to_the_plan():
    """A plan read from PyTorch's CSV numbers buffers its own way: every receive of a run that
    kept the order exactly "left the plan" on a buffer id. Another micro-batch in that place
    still leaves it."""
    from dataclasses import replace

    from explorer.pipeline.schedules.instructions import parse_instruction

    plan = build("1f1b", 2, 4)
    records = _records(plan, {})
    shifted = []
    for r in records:
        ins = parse_instruction(r["text"])
        moved = replace(ins, buffer=ins.buffer + 1) if ins.buffer >= 0 else ins
        shifted.append({**r, "text": str(moved)})
    assert shifted != records and departures(plan, shifted) == []
    mine = [r for r in records if r["rank"] == 1]
    ins = parse_instruction(mine[2]["text"])
    assert ins.microbatch >= 0
    mine[2] = {**mine[2], "text": str(replace(ins, microbatch=ins.microbatch + 1))}
    (left,) = departures(plan, mine)
    assert (left.rank, left.position) == (1, 2)


@pytest.mark.slow
def test_the_seeds_order_leaves_the_fixed_plan_where_the_gradient_should_go_first(
    tmp_path, explorer_cli, seed_bug_run
):
    # the seed's run, launched once for the suite (``explorer run`` of the same schedule writes
    # this folder the same way: test_pipeline_cli runs it through the CLI); a copy, read here
    schedule, result = seed_bug_run
    assert (schedule.params["buffers"], schedule.params["order"]) == ("fixed", "legacy")
    assert result.failure is not None and result.failure.stage == 2
    tmp_path = tmp_path / "seed"
    shutil.copytree(result.folder, tmp_path)
    seen = doctor([], tmp_path)
    assert seen.departures == ()  # against its own plan: kept to it
    # the failed rank is placed at the instruction its failure line names, not the step after
    gone = seen.verdict.state(2)
    assert gone.at is not None and (gone.at.step, gone.at.text) == (6, "2SG0b0")
    fixed = build("deepspeed-train", 4, 8, buffers="fixed", order="fixed")
    left = doctor([], tmp_path, plan=fixed).departures
    assert left is not None
    assert {
        (d.rank, d.step, d.ran.deepspeed_repr(), d.planned and d.planned.deepspeed_repr())
        for d in left
    } == {
        (1, 6, "SendActivation(buffer_id=2)", "RecvGrad(buffer_id=0)"),
        (2, 5, "SendActivation(buffer_id=1)", "RecvGrad(buffer_id=0)"),
        (3, 5, "RecvActivation(buffer_id=1)", "SendGrad(buffer_id=0)"),
    }
    assert [d.at_s for d in left] == sorted(d.at_s for d in left)  # the first in time first
    out = explorer_cli("doctor", str(tmp_path), *SIZE, "--order", "fixed")
    assert out.returncode == 1, out.stderr
    assert f"plan: {left[0].sentence()} (the first to leave it)" in out.stdout
    doc = json.loads(
        explorer_cli("doctor", str(tmp_path), *SIZE, "--order", "fixed", "--json").stdout
    )
    assert [d["rank"] for d in doc["left_the_plan"]] == [d.rank for d in left]
    same = explorer_cli("doctor", str(tmp_path))
    assert "plan: every rank's recorded order kept to it" in same.stdout


@pytest.mark.slow
def test_a_plan_of_another_size_is_refused_and_leaving_the_plan_is_exit_1(
    tmp_path, explorer_cli, cli_1f1b_run
):
    """The 1F1B run of 2 stages x 4 micro-batches (``tests/shared_runs.py``): against a
    4-stage plan it once "left the plan" at its first load; against GPipe of its own size it
    leaves it for real, which is a finding (exit 1), while the run itself waited on no one."""
    folder = shutil.copytree(cli_1f1b_run.folder, tmp_path / "run")
    own = ["--stages", "2", "--microbatches", "4"]
    finished = explorer_cli("doctor", str(folder))  # a good run, read after it ended
    assert finished.returncode == 0 and "verdict: the run finished" in finished.stdout
    assert "gone" not in finished.stdout and finished.stdout.count("finished its run") == 2
    cut = shutil.copytree(folder, tmp_path / "cut")  # rank 1's end line lost: it did not finish
    lines = (cut / "rank1.jsonl").read_text().splitlines(keepends=True)
    (cut / "rank1.jsonl").write_text("".join(x for x in lines if '"done"' not in x))
    gone = explorer_cli("doctor", str(cut))
    assert gone.returncode == 1 and "stage 1 (rank 1) is gone" in gone.stdout, gone.stdout
    wrong = explorer_cli(
        "doctor", str(folder), "--kind", "1f1b", "--stages", "4", "--microbatches", "8"
    )
    assert wrong.returncode == 2 and "not the size of the job" in wrong.stderr, wrong.stderr
    other = explorer_cli("doctor", str(folder), "--kind", "gpipe", *own)
    assert other.returncode == 1 and "(the first to leave it)" in other.stdout, other.stdout
    assert explorer_cli("doctor", str(folder), "--kind", "1f1b", *own).returncode == 0


def test_pid_1_is_refused(explorer_cli):
    done = explorer_cli("doctor", "1")
    assert done.returncode == 2 and "pid 1 is the system's init" in done.stderr


def test_a_size_without_a_plan_is_refused_not_ignored(tmp_path):
    from cli_in_process import call_cli

    for sized in (["--stages", "2"], ["--stages", "2", "--microbatches", "4"]):
        out = call_cli(["doctor", str(tmp_path), *sized])
        assert out.returncode == 2 and "a plan: give --kind or --from" in out.stderr, out.stderr
