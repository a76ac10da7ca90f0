"""The simulated timeline: one row per rank (a process is what runs in time), one bar per
instruction, the bubble shaded.

The bubble is drawn from the same numbers as its fraction in the title: idle time is every
gap between a rank's compute intervals over ``[0, makespan]`` (exchanges count as idle, as in
:func:`explorer.analysis.timeline.bubble`), so the grey area *is* ``of_total`` of the plot.
Large schedules switch to WebGL segments (:mod:`explorer.views.bars`).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.analysis.check import Report
from explorer.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.schedules.schedule import Schedule
from explorer.views.axes import rank_labels, row_height
from explorer.views.bars import MAX_SVG_BARS, hbars
from explorer.views.palette import IDLE, KIND_COLOURS, kind_label
from explorer.views.words import described, short_texts

_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
_TEXT_BARS = 400


def timeline_figure(report: Report, *, max_bars: int = MAX_SVG_BARS) -> go.Figure:
    """Bars per instruction kind on a tick axis, idle gaps shaded, bubble fraction in the title."""
    s, tl = report.schedule, report.timeline
    fig = go.Figure()
    if tl is None:
        fig.update_layout(title=dict(text="Timeline · none: the schedule deadlocks (see the findings)"), height=220)
        fig.add_annotation(text=report.findings.deadlock.describe() if report.findings.deadlock else "no timeline",
                           showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
        return fig
    idle_rank, idle_start, idle_end = idle_intervals(s, tl.start, tl.end, tl.makespan)
    fig.add_trace(hbars("idle (bubble)", idle_rank, idle_start, idle_end, IDLE, width=0.9, max_bars=max_bars,
                        hover=[f"idle {a:g} → {b:g}" for a, b in zip(idle_start.tolist(), idle_end.tolist())]
                        if len(idle_rank) <= max_bars else None))
    dur = tl.end - tl.start
    shown = dur > 0
    many = int(shown.sum()) > _TEXT_BARS
    for kind in Kind:
        rows = np.nonzero(shown & (s.kind == kind))[0]
        if not len(rows):
            continue  # one trace per kind present: fewer traces re-render faster
        hover = text = None
        if len(rows) <= max_bars:
            hover = [f"{c} · {d}<br>{a:g} → {b:g} ticks" for c, d, a, b in
                     zip(short_texts(s, rows), described(s, rows), tl.start[rows].tolist(), tl.end[rows].tolist())]
            if not many:
                text = [f"{kind.code}{m if m >= 0 else ''}" for m in s.microbatch[rows].tolist()]
        fig.add_trace(hbars(kind_label(kind), s.rank[rows], tl.start[rows], tl.end[rows], KIND_COLOURS[kind],
                            hover=hover, text=text, width=0.7, max_bars=max_bars, showlegend=bool(len(rows))))
    b = tl.bubble
    fig.update_layout(
        title=dict(text=f"Timeline · bubble {b.of_total:.1%} of total time ({b.of_ideal:.1%} of ideal compute) · "
                        f"makespan {b.makespan:g} ticks"),
        barmode="overlay", height=row_height(s.num_ranks), margin=dict(l=10, r=10, t=50, b=40),
        plot_bgcolor="white", legend=dict(font=dict(size=10)),
        xaxis=dict(title="simulated time (ticks)", range=[0, max(b.makespan, 1e-9)], showgrid=True, gridcolor="#eee"),
        yaxis=dict(tickvals=list(range(s.num_ranks)), ticktext=rank_labels(s), autorange="reversed", showgrid=False),
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
