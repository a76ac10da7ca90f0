"""The ScheduleExplorer app in a kernel-less Python: controls drive the FigureWidgets.

The browser test checks that the page follows; here the Python side: which figures change,
what the status says, the findings click, the Run seam, and the static copies.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from explorer.analysis import check
from explorer.schedules import Kind
from explorer.traces import MeasuredTrace
from explorer.views.palette import SELECTED
from explorer.widgets.schedule_explorer import ScheduleExplorer
from figdict import figure_dict


def grid_of(app: ScheduleExplorer) -> dict:
    return figure_dict(app.figures["grid"])


def test_stage_slider_rebuilds_every_figure():
    app = ScheduleExplorer("1f1b", 4, 8)
    assert np.array(grid_of(app)["data"][0]["z"], dtype=float).shape == (4, app.report.schedule.num_steps)
    app.controls.stages.value = 5
    z = np.array(grid_of(app)["data"][0]["z"], dtype=float)
    assert z.shape == (5, app.report.schedule.num_steps) and app.report.schedule.num_stages == 5
    assert "5 stages" in app.figures["grid"].layout.title.text
    assert list(app.figures["timeline"].layout.yaxis.ticktext) == [f"stage {s}" for s in range(5)]
    assert [o[1] for o in app.controls.lifetimes_stage.options] == [-1, 0, 1, 2, 3, 4]
    assert app.last_render_s > 0


def test_seed_story_through_the_controls_and_a_findings_click():
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="legacy", order="legacy")
    assert app.report.ok and "no findings" in app.findings.header.value
    app.controls.buffers.value = "fixed"  # remove the +1: the hazard appears
    assert not app.report.ok and "INVALID" in app.status.value
    first = app.findings.findings[0]
    assert (first.stage, first.step) == (2, 6) and app.findings.list.options[0][0] == first.describe()
    app.findings.select(0)
    selected = next(t for t in grid_of(app)["data"] if t["name"] == "selected")
    assert selected["line"]["color"] == SELECTED
    assert (min(selected["x"][:5]) + max(selected["x"][:5])) / 2 == pytest.approx(6)
    assert app.controls.lifetimes_stage.value == 2
    assert app.figures["lifetimes"].layout.title.text.endswith("stage 2: 2 allocated, 3 needed")
    app.controls.order.value = "fixed"  # today's DeepSpeed
    assert app.report.ok and "no findings" in app.figures["grid"].layout.title.text


def test_bad_combination_keeps_the_last_figures_and_says_why():
    app = ScheduleExplorer("interleaved-1f1b", 2, 4, chunks=2)
    before = json.dumps(grid_of(app), sort_keys=True)  # NaN (empty cells) compares equal as text
    app.controls.stages.value = 3  # 4 micro-batches are not a multiple of 3 stages
    assert "must be a positive multiple of stages" in app.status.value
    assert json.dumps(grid_of(app), sort_keys=True) == before
    assert app.controls.order.disabled and not app.controls.chunks.disabled


def test_costs_change_the_timeline():
    app = ScheduleExplorer("1f1b", 4, 8)
    makespan = app.report.timeline.makespan
    app.controls.costs["backward"].value = 4.0
    assert app.report.timeline.makespan > makespan
    assert f"makespan {app.report.timeline.makespan:g} ticks" in app.figures["timeline"].layout.title.text


def _replay(schedule, costs) -> MeasuredTrace:
    """A stand-in runner: replays the simulation at 10 ms per tick (the seam, not a pipeline)."""
    tl = check(schedule, costs).timeline
    keep = tl.end > tl.start
    return MeasuredTrace(schedule.rank[keep], schedule.stage[keep], schedule.step[keep], schedule.kind[keep],
                         schedule.microbatch[keep], tl.start[keep] * 0.01, tl.end[keep] * 0.01, source="replay")


def test_run_seam_calls_the_runner_and_overlays_its_trace():
    app = ScheduleExplorer("gpipe", 2, 4, runner=_replay)
    assert not app.run_button.disabled
    app.run_button.click()
    title = app.figures["overlay"].layout.title.text
    assert "replay" in title and "1 tick = 0.01 s" in title
    names = [t.name for t in app.figures["overlay"].data]
    assert f"measured {Kind.FORWARD.code}" in names
    app.controls.microbatches.value = 6  # a new schedule: the old measurement no longer applies
    assert app.trace is None and "simulated only" in app.figures["overlay"].layout.title.text


def test_without_runner_the_button_says_how_to_get_one():
    app = ScheduleExplorer("gpipe", 2, 4)
    assert app.run_button.disabled and "runner=" in app.run_button.tooltip
    failing = ScheduleExplorer("gpipe", 2, 4, runner=lambda s, c: 1 / 0)
    failing.run()
    assert "run failed: ZeroDivisionError" in failing.status.value


def test_static_copies_are_self_contained(tmp_path):
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    bundle = app._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    fragment = app._repr_html_()
    assert fragment.count("plotly.js v") >= 1 and not re.search(r"<script[^>]+src=", fragment)
    assert fragment.count('class="plotly-graph-div"') == 4
    assert "must send micro-batch 0" in fragment
    path = tmp_path / "explorer.html"
    page = app.to_html(path)
    assert path.read_text() == page and page.startswith("<!DOCTYPE html>")
    assert page.count('class="plotly-graph-div"') == 4 and not re.search(r"<script[^>]+src=", page)
    assert len(re.findall(r"Plotly\.newPlot\(", page)) == 4


def test_widget_state_is_strict_json_after_an_update():
    """Jupyter's wire format is JSON without NaN: every figure state must pass (buffers aside)."""
    from ipywidgets.widgets.widget import _remove_buffers

    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    app.controls.arrows.value = True
    app.controls.stages.value = 5
    for name, fig in app.figures.items():
        state, _, _ = _remove_buffers(fig.get_state())
        json.dumps(state, allow_nan=False)  # raises on NaN/inf
