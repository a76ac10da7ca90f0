"""Schedules side by side: the numbers that decide between them, makespan, bubble and memory.

The teaching notebook compares GPipe, 1F1B, interleaved 1F1B and zero-bubble at the same
stages and micro-batches. Both numbers come from the reports (simulated bubble, peak
activations per stage), with the bubble's denominator named, because tools disagree on it.
The makespan stands beside the bubble: a schedule can idle less and still finish later (an
interleaved chunk charged a whole stage's cost), and the bubble alone would hide it.
"""

from __future__ import annotations

from typing import Mapping, Optional

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.pipeline.analysis.check import Report


def comparison_figure(reports: Mapping[str, Report], title: Optional[str] = None) -> go.Figure:
    """Makespan, bubble (share of total time) and peak activations held on the busiest stage, per schedule."""
    names = list(reports)
    timelines = [reports[n].timeline for n in names]
    makespan = [t.makespan if t else None for t in timelines]
    bubble = [t.bubble.of_total if t else None for t in timelines]
    peak = [max(t.peak_activations) if t else None for t in timelines]
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=(
            "makespan (ticks)",
            "bubble: idle share of ranks × makespan",
            "peak activations on one stage",
        ),
    )
    fig.add_trace(
        go.Bar(
            name="makespan",
            x=names,
            y=makespan,
            marker=dict(color="#555555"),
            text=[f"{m:g}" if m is not None else "deadlock" for m in makespan],
            textposition="outside",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            name="bubble",
            x=names,
            y=bubble,
            marker=dict(color="#9e9e9e"),
            text=[f"{b:.1%}" if b is not None else "deadlock" for b in bubble],
            textposition="outside",
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Bar(
            name="peak activations",
            x=names,
            y=peak,
            marker=dict(color="#1f77b4"),
            text=[str(p) if p is not None else "" for p in peak],
            textposition="outside",
        ),
        row=1,
        col=3,
    )
    first = reports[names[0]].schedule if names else None
    where = f" · {first.num_ranks} ranks, {first.num_microbatches} micro-batches" if first else ""
    fig.update_layout(
        title=dict(text=f"{title or 'Makespan, bubble and memory'}{where}"),
        showlegend=False,
        height=400,
        margin=dict(l=10, r=10, t=80, b=40),
        plot_bgcolor="white",
    )
    fig.update_yaxes(tickformat=".0%", row=1, col=2)
    for col, values in (
        (1, makespan),
        (2, bubble),
        (3, peak),
    ):  # room above the tallest bar for its label
        top = max((v for v in values if v is not None), default=1) or 1
        fig.update_yaxes(range=[0, top * 1.2], row=1, col=col)
    return fig


__all__ = ["comparison_figure"]
