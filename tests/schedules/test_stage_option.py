"""``--stage`` does what it says wherever it is accepted, and is refused where it would be ignored.

``check --stage 3`` once listed every stage's findings, and ``schedule --stage 2 --format csv``
wrote all four ranks: a user read output about stages they had asked to leave out.
"""

from __future__ import annotations

import json

from cli_in_process import call_cli

SEED = ["--kind", "deepspeed-train", "--stages", "4", "--microbatches", "8", "--buffers", "fixed",
        "--order", "legacy"]  # fmt: skip


def test_check_lists_only_the_stages_findings_and_counts_the_others():
    whole = json.loads(call_cli(["check", *SEED, "--json"]).stdout)
    for stage in range(4):
        text = call_cli(["check", *SEED, "--stage", str(stage)])
        doc = json.loads(call_cli(["check", *SEED, "--stage", str(stage), "--json"]).stdout)
        assert text.returncode == 1 and doc["ok"] is False  # the verdict is the schedule's
        mine = [h for h in whole["hazards"] if h["stage"] == stage]
        assert doc["hazards"] == mine and doc["stage"] == stage
        assert doc["findings_on_other_stages"] == len(whole["hazards"]) - len(mine)
        listed = [line for line in text.stdout.splitlines() if line.startswith("#   stage ")]
        assert len(listed) == len(mine) and all(f"stage {stage} " in line for line in listed)
        if len(mine) < len(whole["hazards"]):
            others = len(whole["hazards"]) - len(mine)
            assert f"({others} finding(s) on other stages than {stage}" in text.stdout


def test_schedule_refuses_stage_for_the_formats_that_hold_the_whole_schedule():
    for fmt in ("json", "csv", "html"):
        done = call_cli(["schedule", *SEED, "--stage", "2", "--format", fmt])
        assert done.returncode == 2 and "drop --stage" in done.stderr, done.stderr
    assert call_cli(["schedule", *SEED, "--stage", "2"]).returncode == 0


def _late_optimizer_csv(tmp_path) -> str:
    """1F1B 2 x 2 as ``schedule --format csv`` writes it, with rank 0's optimizer step moved
    before its last backward: a deadlock (spanning both stages) and a late weight gradient on
    stage 0, beside each other in the one schedule."""
    rows = call_cli(["schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "2",
                     "--format", "csv"]).stdout.splitlines()  # fmt: skip
    backward = rows.index("0,5,1,0,0B1b1,BackwardPass,1,1")
    step = rows.index("0,5,3,0,0O,OptimizerStep,-1,-1")
    rows[backward], rows[step] = "0,5,1,0,0O,OptimizerStep,-1,-1", "0,5,3,0,0B1b1,BackwardPass,1,1"
    path = tmp_path / "late.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_text_and_json_leave_out_the_same_findings_gradients_and_deadlocks_included(tmp_path):
    """The text counted the deadlock as another stage's and the JSON left the gradient
    findings unfiltered: 2 left out in one, 0 or 1 in the other."""
    plan = ["--from", _late_optimizer_csv(tmp_path), "--model", "blocking"]
    for stage in (0, 1):
        text = call_cli(["check", *plan, "--stage", str(stage)]).stdout
        doc = json.loads(call_cli(["check", *plan, "--stage", str(stage), "--json"]).stdout)
        said = [line for line in text.splitlines() if "finding(s) on other stages" in line]
        left = int(said[0].split("(")[1].split()[0]) if said else 0
        assert left == doc["findings_on_other_stages"], (stage, text, doc)
        assert "deadlock under blocking P2P" in text and doc["deadlock"] is not None
        grads = doc["gradients"]["not_exactly_once"]
        assert [g["stage"] for g in grads] == ([0] if stage == 0 else [])
        assert ("its weight gradient reaches" in text) == (stage == 0)


def _swapped_receives_csv(tmp_path) -> str:
    """GPipe 3 x 3 as ``schedule --format csv`` writes it, with two of stage 2's receives swapped:
    two mismatches and a hazard, all on stage 2 (a mismatch's stage is its receive's)."""
    rows = call_cli(["schedule", "--kind", "gpipe", "--stages", "3", "--microbatches", "3",
                     "--format", "csv"]).stdout.splitlines()  # fmt: skip
    first = rows.index("2,2,0,2,2RA0b0,RecvActivation,0,0")
    second = rows.index("2,3,0,2,2RA1b1,RecvActivation,1,1")
    rows[first], rows[second] = (
        "2,2,0,2,2RA1b1,RecvActivation,1,1",
        "2,3,0,2,2RA0b0,RecvActivation,0,0",
    )
    path = tmp_path / "swapped.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_mismatches_are_kept_by_their_receives_stage_in_text_and_json(tmp_path):
    """The JSON kept every mismatch under any --stage (its entries hold the send's and the
    receive's places, no top-level stage), while the text kept stage 2's only."""
    plan = ["--from", _swapped_receives_csv(tmp_path), "--model", "batched"]
    whole = json.loads(call_cli(["check", *plan, "--json"]).stdout)
    assert len(whole["mismatched"]) == 2
    assert {m["recv"]["stage"] for m in whole["mismatched"]} == {2}
    for stage in range(3):
        text = call_cli(["check", *plan, "--stage", str(stage)]).stdout
        doc = json.loads(call_cli(["check", *plan, "--stage", str(stage), "--json"]).stdout)
        assert len(doc["mismatched"]) == (2 if stage == 2 else 0), (stage, doc["mismatched"])
        said = [line for line in text.splitlines() if "finding(s) on other stages" in line]
        left = int(said[0].split("(")[1].split()[0]) if said else 0
        assert left == doc["findings_on_other_stages"], (stage, text, doc)
