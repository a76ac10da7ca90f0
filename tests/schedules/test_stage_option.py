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
