"""The timeline: one bar per instruction at its simulated time, the bubble shaded exactly."""

from __future__ import annotations

import numpy as np
import pytest
from figdict import figure_dict, trace

from explorer.pipeline.analysis import build, check
from explorer.pipeline.schedules import Kind
from explorer.pipeline.views.palette import IDLE, KIND_COLOURS, kind_label
from explorer.pipeline.views.timeline import timeline_figure


@pytest.mark.parametrize(
    "kind,chunks", [("gpipe", 1), ("1f1b", 1), ("zb-h1", 1), ("interleaved-1f1b", 2)]
)
def test_bars_are_the_simulated_intervals_and_idle_is_the_bubble(kind, chunks):
    report = check(build(kind, 4, 8, chunks=chunks))
    s, tl = report.schedule, report.timeline
    d = figure_dict(timeline_figure(report))
    for k in (Kind.FORWARD, Kind.BACKWARD, Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT):
        rows = [i for i in range(len(s)) if s.kind[i] == k and tl.end[i] > tl.start[i]]
        if not rows:
            assert all(t["name"] != kind_label(k) for t in d["data"])
            continue
        bars = trace(d, kind_label(k))
        assert bars["marker"]["color"] == KIND_COLOURS[k]
        got = sorted(zip(bars["y"], bars["base"], [b + w for b, w in zip(bars["base"], bars["x"])]))
        want = sorted((float(s.rank[i]), float(tl.start[i]), float(tl.end[i])) for i in rows)
        assert [v for row in got for v in row] == pytest.approx([v for row in want for v in row])
    idle = trace(d, "idle (bubble)")
    assert idle["marker"]["color"] == IDLE
    ranks, span = s.num_ranks, tl.makespan
    assert sum(idle["x"]) == pytest.approx(tl.bubble.of_total * ranks * span)
    assert f"{tl.bubble.of_total:.1%}" in d["layout"]["title"]["text"]


def test_gpipe_bubble_matches_the_closed_form_in_the_title():
    p, m = 4, 8
    report = check(build("gpipe", p, m))
    title = figure_dict(timeline_figure(report))["layout"]["title"]["text"]
    assert f"{(p - 1) / (m + p - 1):.1%} of total time" in title


def test_large_schedules_switch_to_an_overview_that_agrees_with_the_bars():
    """Above max_bars the timeline is one heatmap: per rank and column, the kind that runs most of
    it (upper half-row) and the runner-up when it runs a fifth of the busy time (lower half-row)."""
    report = check(build("1f1b", 16, 64))
    s, tl = report.schedule, report.timeline
    d = figure_dict(timeline_figure(report, max_bars=100))
    heat = trace(d, "instructions")
    assert heat["type"] == "heatmap" and "overview" in d["layout"]["title"]["text"]
    z, x = np.asarray(heat["z"], dtype=float), np.asarray(heat["x"], dtype=float)
    assert z.shape[0] == 2 * s.num_ranks and z.shape[1] <= 480
    width = x[1] - x[0]
    for rank in (0, 7, 15):
        for col in (3, z.shape[1] // 2, z.shape[1] - 5):
            a, b = x[col] - width / 2, x[col] + width / 2
            cover = {}
            for i in np.nonzero((s.rank == rank) & (tl.end > tl.start))[0]:
                piece = min(b, tl.end[i]) - max(a, tl.start[i])
                if piece > 0:
                    cover[int(s.kind[i])] = cover.get(int(s.kind[i]), 0.0) + piece
            ranked = sorted(cover, key=cover.get, reverse=True)
            expected = ranked[0] if cover else None
            runner_up = (
                ranked[1]
                if len(ranked) > 1 and cover[ranked[1]] >= 0.2 * sum(cover.values())
                else expected
            )
            upper, lower = z[2 * rank, col], z[2 * rank + 1, col]
            if expected is None:
                assert np.isnan(upper) and np.isnan(lower), (rank, col, cover)
            else:
                assert (upper, lower) == (expected, runner_up), (rank, col, cover)
    zoomed = figure_dict(timeline_figure(report, max_bars=100, x_range=(40.0, 44.0)))
    fwd = trace(zoomed, kind_label(Kind.FORWARD))
    assert fwd["type"] == "bar" and all(
        b + w >= 40.0 and b <= 44.0 for b, w in zip(fwd["base"], fwd["x"])
    )


def test_comparison_shows_each_schedules_bubble_and_peak_memory():
    from explorer.pipeline.views.compare import comparison_figure

    reports = {k: check(build(k, 4, 8)) for k in ("gpipe", "1f1b", "zb-h1")}
    d = figure_dict(comparison_figure(reports))
    bubble, peak = trace(d, "bubble"), trace(d, "peak activations")
    assert bubble["x"] == list(reports)
    assert bubble["y"] == pytest.approx([r.timeline.bubble.of_total for r in reports.values()])
    assert peak["y"] == [max(r.timeline.peak_activations) for r in reports.values()]
    assert peak["y"][0] == 8 and peak["y"][1] == 4  # GPipe holds every micro-batch, 1F1B at most p
    assert bubble["y"][2] < bubble["y"][1]  # zero-bubble's point


def _overview_mix(kind: str) -> float:
    """Share of the middle rank's busy overview columns at 64 x 512 that show both F and B."""
    report = check(build(kind, 64, 512))
    d = figure_dict(timeline_figure(report))
    assert "overview" in d["layout"]["title"]["text"]
    z = np.asarray(trace(d, "instructions")["z"], dtype=float)
    upper, lower = z[2 * 32], z[2 * 32 + 1]
    busy = ~np.isnan(upper)
    both = {int(Kind.FORWARD), int(Kind.BACKWARD)}
    mixed = np.array([{u, v} == both for u, v in zip(upper[busy], lower[busy])])
    return float(mixed.mean())


def test_the_overview_shows_1f1b_alternating_and_gpipe_not():
    """At 64 x 512 every overview column holds several instructions: by the dominant kind alone
    1F1B's steady state was solid backward, like GPipe's drain. Its columns must show both."""
    assert _overview_mix("1f1b") > 0.6
    assert _overview_mix("gpipe") < 0.1
