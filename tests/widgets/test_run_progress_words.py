"""Runtimes hand the explorer typed records; the explorer alone turns them into words."""

from __future__ import annotations

from pathlib import Path

from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
from explorer.pipeline.traces.follow import RankProgress
from explorer.pipeline.traces.result import PipelineRunResult


def test_rank_progress_records_become_one_line_per_rank():
    app = ScheduleExplorer("1f1b", 2, 4)
    app.show_progress(
        [
            RankProgress(0, steps_done=3, last_step=5, iteration=1, state="running"),
            RankProgress(1, last_step=-1, iteration=-1, state="starting"),
        ]
    )
    text = app.run_status.value
    assert "running the real pipeline" in text
    assert "rank 0: running, iteration 1, step 5" in text
    assert "rank 1: starting, iteration 0, step -1" in text


def test_a_finished_run_is_said_with_its_verdict_and_folder():
    app = ScheduleExplorer("1f1b", 2, 4)
    ok = PipelineRunResult(True, [0.5], True, None, [], folder=Path("/tmp/explorer-run-abc"))
    app.show_result(ok)
    assert "ran " in app.run_status.value and "on 2 processes" in app.run_status.value
    assert "bitwise equal to the reference (run folder explorer-run-abc)" in app.run_status.value
    app.show_result(PipelineRunResult(True, [0.5], False, None, []))
    assert "DIFFERENT FROM the reference" in app.run_status.value


def test_the_status_line_is_built_from_the_report_not_from_its_text():
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    status = app.status.value
    assert status.startswith("verdict: INVALID under")
    assert "buffers allocated per stage:" in status and "bubble:" in status
    assert "# " not in status  # no listing markup leaks into the page
