"""Memory per rank over time and the gradient check in the schedule explorer and its views."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
from figdict import figure_dict

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.memory import memory_over_time
from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
from explorer.pipeline.schedules.torch_csv import order_from_schedule, schedule_from_order
from explorer.pipeline.views.memory import MAX_ROWS, binned_totals, memory_figure


def _peaks(fig: dict) -> list[tuple[float, int]]:
    trace = [t for t in fig["data"] if t["name"] == "peak"]
    xs = [x for t in trace for x in t["x"]]
    ys = [y for t in trace for y in t["y"]]
    return list(zip(xs, ys))


def test_memory_figure_is_shown_filled_and_follows_the_schedule() -> None:
    app = ScheduleExplorer("1f1b", 4, 8)
    fig = figure_dict(app.figures["memory"])
    memory = memory_over_time(app.report.schedule, app.report.timeline)
    assert _peaks(fig) == [(m.peak_time, m.peak) for m in memory]
    held = [t["y"] for t in fig["data"] if t["name"] == "activations held"]
    assert [max(y) for y in held] == [4, 3, 2, 1]  # 1F1B: stage s holds min(p - s, m)
    before = app._live["memory"].widget.revision
    app.controls.stages.value = 6
    fig = figure_dict(app.figures["memory"])
    assert len(_peaks(fig)) == 6 and app._live["memory"].widget.revision > before
    held = [t["y"] for t in fig["data"] if t["name"] == "activations held"]
    assert [max(y) for y in held] == [6, 5, 4, 3, 2, 1]
    app.controls.kind.value = "gpipe"  # GPipe holds every micro-batch on every stage
    held = [
        t["y"]
        for t in figure_dict(app.figures["memory"])["data"]
        if t["name"] == "activations held"
    ]
    assert [max(y) for y in held] == [8] * 6


def test_gradient_verdict_is_said_and_a_wrong_count_named() -> None:
    app = ScheduleExplorer("interleaved-1f1b", 2, 4, chunks=2)
    assert "exactly once" in app.gradients.value and "do not reach" not in app.status.value
    order = order_from_schedule(build("interleaved-1f1b", 2, 4, chunks=2))
    order[0] = [a for a in order[0] if str(a) != "2B1"] + [order[0][-1]]  # drop 2B1, run 0B3 twice
    app.show_schedule(schedule_from_order(order))
    assert "2 (stage, micro-batch) weight gradient(s) do not reach" in app.status.value
    said = app.gradients.value
    assert "stage 2 micro-batch 1: its weight gradient reaches the optimizer step never" in said
    assert "stage 0 micro-batch 3: its weight gradient reaches the optimizer step 2 times" in said
    assert "optimizer step never" in app.to_html()
    app.controls.microbatches.value = 6  # back to a built schedule: the verdict follows
    assert "exactly once" in app.gradients.value and "do not reach" not in app.status.value


def test_deadlocked_schedule_says_why_there_is_no_memory() -> None:
    app = ScheduleExplorer("1f1b", 4, 8)
    assert figure_dict(app.figures["memory"])["data"]
    built = build("1f1b", 4, 8)  # PyTorch's order run on blocking P2P: every rank waits
    app.show_schedule(replace(built, params={**built.params, "p2p": "blocking"}))
    assert app.report.timeline is None
    fig = figure_dict(app.figures["memory"])
    assert fig["data"] == [] and "the schedule deadlocks" in fig["layout"]["title"]["text"]


def test_memory_overview_at_64_by_1024_stays_small_and_keeps_each_peak() -> None:
    report = check(build("1f1b", 64, 1024))
    memory = memory_over_time(report.schedule, report.timeline)
    fig = memory_figure(memory)
    payload = fig.to_json()
    assert len(payload) < 400_000, len(payload)
    doc = figure_dict(fig)
    heat = doc["data"][0]
    assert heat["type"] == "heatmap" and np.array(heat["z"]).shape == (64, 240)
    z = np.array(heat["z"])
    assert [int(v) for v in z.max(axis=1)] == [m.peak for m in memory]  # no peak averaged away
    marks = next(t for t in doc["data"] if t["name"] == "peak")
    assert list(zip(marks["x"], marks["y"], marks["customdata"])) == [
        (m.peak_time, m.rank, m.peak) for m in memory
    ]
    assert json.loads(payload)["layout"]["height"] <= 900


def test_binned_totals_take_the_largest_value_in_each_bin() -> None:
    report = check(build("gpipe", 3, 4))
    memory = memory_over_time(report.schedule, report.timeline)
    z, edges = binned_totals(memory, bins=5)
    assert z.shape == (3, 5) and edges[0] == 0 and edges[-1] == max(m.times[-1] for m in memory)
    for row, m in enumerate(memory):
        total = np.add(m.activations, m.receive_buffers)
        assert z[row].max() == m.peak == total.max()
    assert len(memory) <= MAX_ROWS


def test_explorer_at_64_by_1024_sends_a_small_memory_figure() -> None:
    app = ScheduleExplorer("1f1b", 64, 1024)
    assert 0 < app._live["memory"].last_bytes < 400_000
    assert figure_dict(app.figures["memory"])["data"][0]["type"] == "heatmap"


def test_memory_peaks_read_as_the_grid_writes_and_ticks_count_whole_micro_batches() -> None:
    """Seen in JupyterLab: 'peak 5 after 0RG0b0' (the stage glued in front) and a rank whose
    peak is 1 ticked 0, 0.5, 1 micro-batches."""
    report = check(build("1f1b", 4, 8))
    memory = memory_over_time(report.schedule, report.timeline)
    fig = figure_dict(memory_figure(memory))
    labels = [t["text"][0] for t in fig["data"] if t["name"] == "peak"]
    assert labels[0] == "peak 5 after RG0b0" and all(
        not label.split(" after ")[1][0].isdigit() for label in labels
    ), labels
    yaxes = [v for k, v in fig["layout"].items() if k.startswith("yaxis")]
    assert len(yaxes) == 4 and all(ax["dtick"] >= 1 for ax in yaxes)
    # with several stages per rank the stage is named, in words
    report = check(build("interleaved-1f1b", 4, 8, chunks=2))
    interleaved = memory_figure(memory_over_time(report.schedule, report.timeline))
    words = [t.text[0] for t in interleaved.data if t.name == "peak"]
    assert any("(stage " in w for w in words), words
