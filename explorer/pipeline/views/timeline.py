"""The simulated timeline: one row per rank (a process is what runs in time), one bar per
instruction, the bubble shaded.

The bubble is drawn from the same numbers as its fraction in the title: idle time is every
gap between a rank's compute intervals over ``[0, makespan]`` (exchanges count as idle, as in
:func:`explorer.pipeline.analysis.timeline.bubble`), so the grey area *is* ``of_total`` of the plot.
Large schedules switch to WebGL segments (:mod:`explorer.pipeline.views.bars`).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.views.axes import rank_labels, row_height
from explorer.pipeline.views.bars import MAX_SVG_BARS, hbars
from explorer.pipeline.views.palette import (
    IDLE,
    IDLE_SOLID,
    KIND_COLOURS,
    discrete_colorscale,
    kind_label,
)
from explorer.pipeline.views.raster import first_two, window
from explorer.pipeline.views.words import described, short_texts

_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
_TEXT_BARS = 400


def _of_ideal(fraction: Optional[float]) -> str:
    """The bubble against ideal compute, or why there is no such ratio (nothing computes: every
    compute cost is 0, which the controls allow)."""
    return "no ideal compute" if fraction is None else f"{fraction:.1%} of ideal compute"


def timeline_figure(
    report: Report, *, max_bars: int = MAX_SVG_BARS, x_range: Optional[tuple[float, float]] = None
) -> go.Figure:
    """Bars per instruction kind on a tick axis, idle gaps shaded, bubble fraction in the title.

    ``x_range`` is the time range on screen: bars are sent for it only, and when more than
    ``max_bars`` fall in it the range is drawn as an overview, exact again once the user
    zooms in: each rank's row is split in two, the upper half the kind that runs most of each
    column and the lower half the next one when it runs a fifth of it or more (the same
    colour when one kind has the column), idle in grey. So 1F1B's steady state reads as
    forwards and backwards alternating, not as a solid backward like GPipe's drain.
    """
    s, tl = report.schedule, report.timeline
    fig = go.Figure()
    if tl is None:
        fig.update_layout(
            title=dict(text="Timeline · none: the schedule deadlocks (see the findings)"),
            height=220,
        )
        fig.add_annotation(
            text=report.findings.deadlock.describe() if report.findings.deadlock else "no timeline",
            showarrow=False,
            x=0.5,
            y=0.5,
            xref="paper",
            yref="paper",
        )
        return fig
    lo, hi = window(x_range, 0.0, max(tl.makespan, 1e-9))
    dur = tl.end - tl.start
    shown = (dur > 0) & (tl.end >= lo) & (tl.start <= hi)
    overview = int(shown.sum()) > max_bars
    if overview:
        first, second = first_two(
            s.rank[shown],
            tl.start[shown],
            tl.end[shown],
            s.kind[shown],
            s.num_ranks,
            (lo, hi),
            num_categories=len(Kind),
        )
        # Half-rows: row 2r is rank r's first kind (upper half), 2r+1 its runner-up (lower half).
        z = np.empty((2 * s.num_ranks, first.z.shape[1]), dtype=np.float32)
        z[0::2], z[1::2] = first.z, second.z
        halves = np.repeat(np.arange(s.num_ranks, dtype=float), 2) + np.tile(
            [-0.2, 0.2], s.num_ranks
        )
        # No per-cell hover text here: each string costs plotly a copy, and the colours and the
        # legend already say the kind; zooming in gives exact bars with their words.
        fig.add_trace(
            go.Heatmap(
                name="instructions",
                z=z,
                x=first.centres,
                y=halves,
                zmin=-0.5,
                zmax=len(Kind) - 0.5,
                colorscale=discrete_colorscale(),
                showscale=False,
                hoverongaps=False,
                hovertemplate="t ≈ %{x:.4g}: zoom in for each instruction<extra></extra>",
            )
        )
        for kind in (
            k for k in Kind if (s.kind[shown] == k).any()
        ):  # the legend still names the kinds
            fig.add_trace(
                go.Scatter(
                    name=kind_label(kind),
                    x=[None],
                    y=[None],
                    mode="markers",
                    marker=dict(symbol="square", size=11, color=KIND_COLOURS[kind]),
                    hoverinfo="skip",
                )
            )
    else:
        idle_rank, idle_start, idle_end = idle_intervals(s, tl.start, tl.end, tl.makespan)
        near = (idle_end >= lo) & (idle_start <= hi)
        idle_rank, idle_start, idle_end = idle_rank[near], idle_start[near], idle_end[near]
        fig.add_trace(
            hbars(
                "idle (bubble)",
                idle_rank,
                idle_start,
                idle_end,
                IDLE,
                width=0.9,
                max_bars=max_bars,
                hover=[
                    f"idle {a:g} → {b:g}" for a, b in zip(idle_start.tolist(), idle_end.tolist())
                ],
            )
        )
        many = int(shown.sum()) > _TEXT_BARS
        for kind in Kind:
            rows = np.nonzero(shown & (s.kind == kind))[0]
            if not len(rows):
                continue  # one trace per kind present: fewer traces re-render faster
            hover = [
                f"{c} · {d}<br>{a:g} → {b:g} ticks"
                for c, d, a, b in zip(
                    short_texts(s, rows),
                    described(s, rows),
                    tl.start[rows].tolist(),
                    tl.end[rows].tolist(),
                )
            ]
            text = (
                None
                if many
                else [f"{kind.code}{m if m >= 0 else ''}" for m in s.microbatch[rows].tolist()]
            )
            fig.add_trace(
                hbars(
                    kind_label(kind),
                    s.rank[rows],
                    tl.start[rows],
                    tl.end[rows],
                    KIND_COLOURS[kind],
                    hover=hover,
                    text=text,
                    width=0.7,
                    max_bars=max_bars,
                    showlegend=bool(len(rows)),
                )
            )
    b = tl.bubble
    fig.update_layout(
        title=dict(
            text=f"Timeline · bubble {b.of_total:.1%} of total time ({_of_ideal(b.of_ideal)}) · "
            f"makespan {b.makespan:g} ticks"
            + (
                "<br><sup>overview: in each rank's row the upper half is the kind that runs most of a column, the lower half "
                "the next one (one colour: one kind), idle in grey; zoom in for each instruction</sup>"
                if overview
                else ""
            )
        ),
        barmode="overlay",
        height=row_height(s.num_ranks),
        margin=dict(l=10, r=10, t=50, b=40),
        plot_bgcolor=IDLE_SOLID if overview else "white",
        legend=dict(font=dict(size=10)),
        xaxis=dict(
            title="simulated time (ticks)", range=[lo, hi], showgrid=not overview, gridcolor="#eee"
        ),
        yaxis=dict(
            tickvals=list(range(s.num_ranks)),
            ticktext=rank_labels(s),
            autorange="reversed",
            showgrid=False,
        ),
    )
    return fig


def idle_intervals(schedule: Schedule, start: np.ndarray, end: np.ndarray, makespan: float):
    """Per rank, the gaps between compute intervals over ``[0, makespan]``: (rank, start, end) columns."""
    compute = np.isin(schedule.kind, _COMPUTE) & (end > start)
    rank = schedule.rank[compute].astype(np.int64)
    a, b = start[compute], end[compute]
    order = np.lexsort((a, rank))
    rank, a, b = rank[order], a[order], b[order]
    ranks = np.arange(schedule.num_ranks)
    # Sentinels: a zero-length interval at 0 and at the makespan on every rank.
    rank = np.r_[ranks, rank, ranks]
    a = np.r_[np.zeros(len(ranks)), a, np.full(len(ranks), makespan)]
    b = np.r_[np.zeros(len(ranks)), b, np.full(len(ranks), makespan)]
    order = np.lexsort((a, rank))
    rank, a, b = rank[order], a[order], b[order]
    covered = np.empty_like(b)
    for r in ranks:  # running max of ends within each rank (ranks <= 64: a short loop)
        sl = rank == r
        covered[sl] = np.maximum.accumulate(b[sl])
    same = rank[1:] == rank[:-1]
    gap_start, gap_end = covered[:-1], a[1:]
    keep = same & (gap_end > gap_start + 1e-12)
    return rank[:-1][keep], gap_start[keep], gap_end[keep]


__all__ = ["timeline_figure", "idle_intervals"]
