"""The instruction grid, read back from ``fig.to_dict()``: cells, colours, outlines, hover."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from figdict import figure_dict, trace

from explorer.pipeline.analysis import build, check
from explorer.pipeline.schedules import Kind
from explorer.pipeline.views.grid import grid_figure
from explorer.pipeline.views.marks import findings_by_cell
from explorer.pipeline.views.palette import HAZARD, KIND_COLOURS, SELECTED


def colour_of(heat: dict, value: float) -> str:
    """The colour the page paints for ``value``, decoded from the heatmap's own colorscale."""
    pos = (value - heat["zmin"]) / (heat["zmax"] - heat["zmin"])
    scale = heat["colorscale"]
    for (p0, c0), (p1, c1) in zip(scale, scale[1:]):
        if p0 <= pos <= p1 and c0 == c1:
            return c0
    raise AssertionError(f"no flat band for {value}")


def outlined_cells(outline: dict) -> set[tuple[int, int]]:
    """(stage, step) of every rectangle in a None-separated outline polyline."""
    xs, ys = outline["x"], outline["y"]
    cells = set()
    for i in range(0, len(xs), 6):
        cx = (min(xs[i : i + 5]) + max(xs[i : i + 5])) / 2
        cy = (min(ys[i : i + 5]) + max(ys[i : i + 5])) / 2
        cells.add((round(cy), round(cx)))
    return cells


def test_seed_hazard_cell_text_colour_outline_and_words(seed_bug):
    d = figure_dict(grid_figure(seed_bug))
    heat = trace(d, "instructions")
    text = heat["text"][2][6].replace("<br>", " ").split()
    assert text == ["RA2b0", "SG0b0", "F2b0"]  # the seed's "# WRONG!" line, in order
    assert (
        colour_of(heat, heat["z"][2][6]) == KIND_COLOURS[Kind.FORWARD]
    )  # the compute colours the cell
    outline = trace(d, "findings")
    assert outline["line"]["color"] == HAZARD
    hazard_cells = {(h.stage, h.step) for h in seed_bug.findings.hazards}
    assert outlined_cells(outline) == hazard_cells and (2, 6) in hazard_cells
    hover = heat["hovertext"][2][6].replace("<br>", " ")
    assert "HAZARD" in hover and "RecvActivation(buffer_id=0) at step 6 replaced" in hover
    assert "11 findings" in d["layout"]["title"]["text"]


def test_every_cell_matches_the_schedule(seed_fixed):
    d = figure_dict(grid_figure(seed_fixed))
    heat = trace(d, "instructions")
    s = seed_fixed.schedule
    for stage in range(s.num_stages):
        stream = s.stream(s.stage_to_rank[stage])
        for step, instrs in enumerate(stream):
            mine = [i for i in instrs if i.stage == stage]
            cell = heat["text"][stage][step].replace("<br>", " ").split()
            assert cell == [str(i)[len(str(stage)) :] for i in mine]
            if not mine:
                assert math.isnan(
                    heat["z"][stage][step]
                )  # an empty, unpainted cell (NaN in a typed array)
                continue
            compute = [i for i in mine if i.kind.is_compute]
            main = (compute or [i for i in mine if i.kind.is_p2p] or mine)[0]
            assert colour_of(heat, heat["z"][stage][step]) == KIND_COLOURS[main.kind]
    assert trace(d, "findings")["x"] == [] and "no findings" in d["layout"]["title"]["text"]
    assert len({KIND_COLOURS[k] for k in Kind}) == len(Kind)


def test_selected_cell_and_arrows(seed_bug):
    d = figure_dict(grid_figure(seed_bug, selected=(2, 6), arrows=True))
    assert (
        outlined_cells(trace(d, "selected")) == {(2, 6)}
        and trace(d, "selected")["line"]["color"] == SELECTED
    )
    arrows = trace(d, "send -> receive")
    pairs = int((seed_bug.matching.partner >= 0).sum() // 2)
    assert len(arrows["x"]) == 3 * pairs
    s = seed_bug.schedule
    send = next(i for i in range(len(s)) if s.kind[i] == Kind.SEND_ACTIVATION and s.stage[i] == 0)
    recv = int(seed_bug.matching.partner[send])
    segments = list(zip(arrows["x"][0::3], arrows["y"][0::3], arrows["x"][1::3], arrows["y"][1::3]))
    assert any(
        x0 == s.step[send] and x1 == s.step[recv] and y0 < y1
        for x0, y0, x1, y1 in segments
        if y0 < 1
    )


@pytest.mark.slow
def test_64_stages_512_microbatches_is_one_heatmap_not_a_shape_per_cell():
    report = check(build("deepspeed-train", 64, 512, buffers="fixed", order="legacy"))
    fig = grid_figure(report)
    d = fig.to_dict()
    assert d["data"][0]["type"] == "heatmap" and "text" not in d["data"][0]  # no unreadable text
    assert len(d["data"]) < 20 and not d["layout"].get("shapes")
    marked = next(t for t in d["data"] if t.get("name") == "findings")
    assert (
        marked["type"] == "heatmap"
    )  # tens of thousands of hazards: one red layer, a count per column
    red = next(t for t in fig.data if t.name == "findings")
    assert int(np.nansum(red.z)) == len(findings_by_cell(report))  # every marked cell counted once
    assert len(fig.to_json()) < 1e6  # what the page receives, at any size
    assert json.loads(fig.to_json())["layout"]["yaxis"]["ticktext"][63] == "stage 63"
    assert np.isfinite(report.timeline.makespan)


@pytest.mark.parametrize("stages, microbatches", [(2, 1), (3, 3), (4, 8)])
def test_the_legend_fits_beside_the_plot_without_a_scroll_bar(stages, microbatches):
    """Plotly clips a legend taller than the plot area and gives it a scroll bar: at 3 stages x
    3 micro-batches with arrows and a selection, OptimizerStep was below the fold."""
    report = check(build("deepspeed-train", stages, microbatches, buffers="fixed", order="legacy"))
    d = figure_dict(grid_figure(report, arrows=True, selected=(stages - 1, 2)))
    entries = [t["name"] for t in d["data"] if t["type"] == "scatter" and t.get("showlegend", True)]
    margin = d["layout"]["margin"]
    plot_px = d["layout"]["height"] - margin["t"] - margin["b"]
    # in Chromium one legend line at font size 10 takes 19.5 px, plus about 20 px of padding
    # (measured on the page: 13 entries overflowed a 270 px plot)
    assert plot_px >= 19.5 * len(entries) + 20, (plot_px, entries)
