"""Memory per rank over time: activations held and receive buffers in use, the peak marked.

One row per rank (shared time axis): the held activations as a filled step line and the
receive buffers stacked on them, in micro-batch units, with a marker at the rank's peak saying
when it happens and after which instruction. Pure: records in, ``go.Figure`` out.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.analysis.memory import RankMemory
from explorer.schedules.instructions import Kind
from explorer.views.palette import HAZARD, KIND_COLOURS


def memory_figure(memory: Sequence[RankMemory], unit: str = "ticks") -> go.Figure:
    """Held activations + receive buffers per rank over time, each rank's peak marked."""
    rows = max(len(memory), 1)
    fig = make_subplots(
        rows=rows,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.04,
        subplot_titles=[f"rank {m.rank}: peak {m.peak} at {m.peak_time:g} {unit}" for m in memory],
    )
    for i, m in enumerate(memory, start=1):
        total = [a + b for a, b in zip(m.activations, m.receive_buffers)]
        first = i == 1
        fig.add_trace(
            go.Scatter(
                name="activations held",
                x=list(m.times),
                y=list(m.activations),
                line=dict(shape="hv", color=KIND_COLOURS[Kind.FORWARD]),
                fill="tozeroy",
                legendgroup="act",
                showlegend=first,
            ),
            row=i,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                name="+ receive buffers",
                x=list(m.times),
                y=total,
                line=dict(shape="hv", color=KIND_COLOURS[Kind.RECV_ACTIVATION]),
                fill="tonexty",
                legendgroup="recv",
                showlegend=first,
            ),
            row=i,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                name="peak",
                x=[m.peak_time],
                y=[m.peak],
                mode="markers+text",
                text=[f"peak {m.peak} after {m.peak_instruction}"],
                textposition="middle right",
                marker=dict(color=HAZARD, size=9),
                legendgroup="peak",
                showlegend=first,
            ),
            row=i,
            col=1,
        )
    fig.update_xaxes(title_text=unit, row=rows, col=1)
    fig.update_layout(
        title=dict(
            text="Memory per rank over time (micro-batches of activations and receive buffers)"
        ),
        height=max(260, 150 * rows + 80),
    )
    return fig


__all__ = ["memory_figure"]
