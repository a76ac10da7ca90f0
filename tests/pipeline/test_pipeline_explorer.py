"""The explorer's Run control with the real pipeline: a failed run shows where and why, over its partial trace."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_run_control_shows_the_failure_and_the_partial_trace():
    from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
    from explorer.pipeline.runtime import PipelineRunner

    runner = PipelineRunner(iterations=1)
    app = runner.attach(
        ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy", runner=runner)
    )
    assert app.run() is None
    assert (
        "rank 2, stage 2, step 6, SendGrad(buffer_id=0)" in app.run_status.value
    )  # beside the Run button
    assert (app.selected.stage, app.selected.step) == (
        2,
        6,
    )  # the finding the run ran into, selected
    assert app.trace is not None and len(app.trace) == len(runner.last.records) > 0
    measured = [t for t in app.figures["overlay"].data if t.name and t.name.startswith("measured")]
    assert measured, "the partial trace is drawn on the overlay"
