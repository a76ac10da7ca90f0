"""The ScheduleExplorer app in a kernel-less Python: controls drive the FigureWidgets.

The browser test checks that the page follows; here the Python side: which figures change,
what the status says, the findings click, the Run seam, and the static copies.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from figdict import figure_dict

from explorer.failure import Failure, FailureKind
from explorer.pipeline.analysis import check
from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
from explorer.pipeline.schedules import Kind
from explorer.pipeline.traces import MeasuredTrace
from explorer.pipeline.views.palette import SELECTED


def grid_of(app: ScheduleExplorer) -> dict:
    return figure_dict(app.figures["grid"])


def test_stage_slider_rebuilds_every_figure():
    app = ScheduleExplorer("1f1b", 4, 8)
    assert np.array(grid_of(app)["data"][0]["z"], dtype=float).shape == (
        4,
        app.report.schedule.num_steps,
    )
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
    assert (first.stage, first.step) == (2, 6) and app.findings.list.options[0][
        0
    ] == f"1. {first.describe()}"
    app.findings.select(0)
    selected = next(t for t in grid_of(app)["data"] if t["name"] == "selected")
    assert selected["line"]["color"] == SELECTED
    assert (min(selected["x"][:5]) + max(selected["x"][:5])) / 2 == pytest.approx(6)
    assert app.controls.lifetimes_stage.value == 2
    assert app.figures["lifetimes"].layout.title.text.endswith("stage 2: 2 allocated, 3 needed")
    # what the page's dropdown shows is the synced index, not the kernel's value: it must follow
    # (it kept saying "all stages" over stage 2's lifetimes)
    dropdown = app.controls.lifetimes_stage
    assert dropdown.options[dropdown.get_state()["index"]][0] == "stage 2"
    # the list cuts long findings at its right edge; the selected one is said in full below it
    assert first.describe().split(":")[-1].strip()[-30:] in app.findings.detail.value
    app.controls.lifetimes_stage.value = -1  # back to every stage, from code: the page follows
    assert dropdown.get_state()["index"] == 0
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
    assert (
        f"makespan {app.report.timeline.makespan:g} ticks"
        in app.figures["timeline"].layout.title.text
    )


def _replay(schedule, costs) -> MeasuredTrace:
    """A stand-in runner: replays the simulation at 10 ms per tick (the seam, not a pipeline)."""
    tl = check(schedule, costs).timeline
    keep = tl.end > tl.start
    return MeasuredTrace(
        schedule.rank[keep],
        schedule.stage[keep],
        schedule.step[keep],
        schedule.kind[keep],
        schedule.microbatch[keep],
        tl.start[keep] * 0.01,
        tl.end[keep] * 0.01,
        source="replay",
    )


def test_run_seam_calls_the_runner_and_overlays_its_trace():
    app = ScheduleExplorer("gpipe", 2, 4, runner=_replay)
    assert not app.run_button.disabled
    app.run_button.click()
    title = app.figures["overlay"].layout.title.text
    assert "replay" in title and "re-costed from this measurement" in title
    # The replay is the simulation at 10 ms per tick: re-costed from it, the simulation must agree.
    simulated, measured = (
        float(v)
        for v in re.findall(r"makespan simulated ([0-9.e-]+) s, measured ([0-9.e-]+) s", title)[0]
    )
    assert (
        abs(simulated - measured) <= 0.01 * measured
        and abs(measured - app.report.timeline.makespan * 0.01) < 1e-9
    )
    names = [t.name for t in app.figures["overlay"].data]
    assert f"measured {Kind.FORWARD.code}" in names
    app.controls.microbatches.value = 6  # a new schedule: the old measurement no longer applies
    assert app.trace is None and "simulated only" in app.figures["overlay"].layout.title.text


def test_without_runner_the_button_says_how_to_get_one():
    app = ScheduleExplorer("gpipe", 2, 4)
    assert app.run_button.disabled and "runner=" in app.run_button.tooltip
    failing = ScheduleExplorer("gpipe", 2, 4, runner=lambda s, c: 1 / 0)
    failing.run()
    assert "run failed: ZeroDivisionError" in failing.run_status.value


def test_static_copies_are_self_contained(tmp_path):
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    bundle = app._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    fragment = app._repr_html_()
    assert fragment.count("plotly.js v") >= 1 and not re.search(r"<script[^>]+src=", fragment)
    assert (
        fragment.count('class="plotly-graph-div"') == 5
    )  # grid, timeline, lifetimes, memory, overlay
    assert "must send micro-batch 0" in fragment
    path = tmp_path / "explorer.html"
    page = app.to_html(path)
    assert path.read_text() == page and page.startswith("<!DOCTYPE html>")
    assert page.count('class="plotly-graph-div"') == 5 and not re.search(r"<script[^>]+src=", page)
    assert len(re.findall(r"Plotly\.newPlot\(", page)) == 5


def test_widget_state_is_strict_json_after_an_update():
    """Jupyter's wire format is JSON without NaN: every figure the page receives must parse strictly."""
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    app.controls.arrows.value = True
    app.controls.stages.value = 5

    def refuse(name):  # noqa: E306
        raise ValueError(f"{name} in a figure's JSON")

    for name, live in app._live.items():
        fig = json.loads(live.widget.spec, parse_constant=refuse)
        assert fig["layout"]["title"]["text"] == live.figure.layout.title.text, name
        assert live.widget.revision >= 2 and live.last_bytes == len(live.widget.spec)


def test_an_exception_in_a_callback_is_said_in_the_status_line():
    app = ScheduleExplorer("1f1b", 4, 8)
    app._live["grid"].widget._message(None, {"type": "relayout", "x": [0, 1e300], "y": None}, [])
    assert app.problem.value == ""  # a huge range is clipped to the schedule, not an error
    broken = app._guarded("testing", lambda: [][1])
    broken()
    assert "while testing: IndexError" in app.problem.value and app.errors[-1].startswith(
        "while testing"
    )
    app._live["grid"].widget._message(
        None, {"type": "error", "where": "drawing the figure", "message": "boom"}, []
    )
    assert "could not finish drawing the figure: boom" in app.problem.value


def test_findings_page_through_all_and_a_selection_zooms_the_grid():
    app = ScheduleExplorer("deepspeed-train", 16, 64, buffers="fixed", order="legacy")
    n = len(app.report.findings.all())
    assert n > 200 and app.findings.pager.layout.display is None
    assert app.findings.position.value == f"findings 1–200 of {n:,}"
    app.findings.next.click()
    assert app.findings.list.options[0][0].startswith("201. ")
    app.findings.select(n - 1)  # the last one: turns to its page and outlines it
    last = app.report.findings.all()[-1]
    grid = app.figures["grid"]
    lo, hi = grid.layout.xaxis.range
    assert lo < last.step < hi and hi - lo <= 30
    heat = next(t for t in grid.data if t.name == "instructions")
    assert heat.texttemplate == "%{text}"  # zoomed in far enough to read the cells
    assert app.controls.lifetimes_stage.value == last.stage
    dropdown = app.controls.lifetimes_stage
    assert dropdown.options[dropdown.get_state()["index"]][1] == last.stage


@pytest.mark.slow  # every control at 64 x 512
def test_every_change_sends_at_most_a_megabyte_per_figure_at_64_by_512():
    app = ScheduleExplorer("deepspeed-train", 64, 512, buffers="fixed", order="legacy")
    sizes = {name: live.last_bytes for name, live in app._live.items()}
    app.controls.microbatches.value = 500
    sizes2 = {name: live.last_bytes for name, live in app._live.items()}
    assert max(sizes.values()) <= 1_000_000 and max(sizes2.values()) <= 1_000_000, (sizes, sizes2)
    app._zoomed("grid", (100.0, 120.0))  # detail for the range the user zoomed to
    assert app._live["grid"].last_bytes <= 1_000_000
    assert "steps 100–120" in app.figures["grid"].layout.title.text


def test_a_failed_run_selects_the_finding_it_ran_into():
    class Failed(RuntimeError):
        result = type(
            "R",
            (),
            {
                "failure": Failure(
                    FailureKind.ERROR, "inputs[0].grad is None", rank=2, stage=2, step=6
                )
            },
        )()

    def runner(schedule, costs):
        raise Failed("rank 2, stage 2, step 6, SendGrad(buffer_id=0): inputs[0].grad is None")

    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy", runner=runner)
    app.run_button.click()
    assert "run failed" in app.run_status.value and "step 6" in app.run_status.value
    assert app.selected is not None and (app.selected.stage, app.selected.step) == (2, 6)
    selected = next(t for t in app.figures["grid"].data if t.name == "selected")
    xs = [x for x in selected.x if x is not None and x == x]
    assert min(xs) > 5 and max(xs) < 7
    # The detail line says why the finding is selected, and the button returns to it.
    detail = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", app.findings.detail.value))
    assert "the run failed here (rank 2, stage 2, step 6)" in detail and "SendGrad" in detail
    assert app.findings.again.layout.display is None
