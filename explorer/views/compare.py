"""Schedules side by side: the two numbers that decide between them, bubble and memory.

The teaching notebook compares GPipe, 1F1B, interleaved 1F1B and zero-bubble at the same
stages and micro-batches. Both numbers come from the reports (simulated bubble, peak
activations per stage), with the bubble's denominator named, because tools disagree on it.
"""

from __future__ import annotations

from typing import Mapping

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis.check import Report


def comparison_figure(reports: Mapping[str, Report]) -> go.Figure:
    """Bubble (share of total time) and peak activations held on the busiest stage, per schedule."""
    names = list(reports)
    bubble = [reports[n].timeline.bubble.of_total if reports[n].timeline else None for n in names]
    peak = [max(reports[n].timeline.peak_activations) if reports[n].timeline else None for n in names]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bubble: idle share of total time (ranks × makespan)",
                                                        "peak activations held on one stage (micro-batches)"))
    fig.add_trace(go.Bar(name="bubble", x=names, y=bubble, marker=dict(color="#9e9e9e"),
                         text=[f"{b:.1%}" if b is not None else "deadlock" for b in bubble], textposition="outside"), row=1, col=1)
    fig.add_trace(go.Bar(name="peak activations", x=names, y=peak, marker=dict(color="#1f77b4"),
                         text=[str(p) if p is not None else "" for p in peak], textposition="outside"), row=1, col=2)
    first = reports[names[0]].schedule if names else None
    where = f" · {first.num_ranks} ranks, {first.num_microbatches} micro-batches" if first else ""
    fig.update_layout(title=dict(text=f"Bubble and memory{where}"), showlegend=False, height=380,
                      margin=dict(l=10, r=10, t=70, b=40), plot_bgcolor="white")
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    return fig
