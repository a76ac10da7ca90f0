"""Memory per rank over time: activations held and input buffers in use, the peak marked.

A few ranks: one row per rank (shared time axis), the held activations as a filled step line
and the input buffers stacked on them, in micro-batch units, with a marker at the rank's
peak saying when it happens and after which instruction. Many ranks (64 rows of step lines
would be a 10,000 px page): one heatmap, rank by time, of the total in use, binned to
``OVERVIEW_BINS`` columns (the largest value in each bin, so no peak is averaged away), each
rank's exact peak marked on it. Either way the figure stays small whatever the schedule's
size. Pure: records in, ``go.Figure`` out.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.pipeline.analysis.memory import RankMemory
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.views.palette import ACTIVATION, HAZARD, KIND_COLOURS

#: Up to this many ranks, one row of step lines each; beyond it, the heatmap overview.
MAX_ROWS = 8
#: Time columns of the overview: about one per 4 px of a full-width plot.
OVERVIEW_BINS = 240
TITLE = "Memory per rank over time (micro-batches of activations and input buffers)"


def memory_figure(
    memory: Sequence[RankMemory], unit: str = "ticks", max_rows: int = MAX_ROWS
) -> go.Figure:
    """Held activations + input buffers per rank over time, each rank's peak marked."""
    if len(memory) > max_rows:
        return _overview(memory, unit)
    rows = max(len(memory), 1)
    end = max((m.times[-1] for m in memory if m.times), default=0.0)
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
                name="+ input buffers",
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
                text=[f"peak {m.peak} after {m.peak_words()}"],
                # a late peak is labelled on its left: on its right the words ran off the plot
                textposition="middle left" if m.peak_time > 0.6 * end else "middle right",
                marker=dict(color=HAZARD, size=9),
                legendgroup="peak",
                showlegend=first,
            ),
            row=i,
            col=1,
        )
        # counts of micro-batches: whole-number ticks (a peak of 1 was ticked 0, 0.5, 1)
        fig.update_yaxes(
            dtick=max(1, int(np.ceil(max(m.peak, 1) / 4))),
            rangemode="tozero",
            gridcolor="#eee",
            row=i,
            col=1,
        )
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_xaxes(title_text=unit, row=rows, col=1)
    fig.update_layout(
        title=dict(text=TITLE), height=max(260, 150 * rows + 80), plot_bgcolor="white"
    )
    return fig


def binned_totals(memory: Sequence[RankMemory], bins: int = OVERVIEW_BINS) -> tuple:
    """``(z, edges)``: per rank and time bin, the largest total (activations + input buffers)
    the step function takes inside the bin; ``edges`` has ``bins + 1`` entries."""
    end = max((m.times[-1] for m in memory if m.times), default=0.0)
    edges = np.linspace(0.0, max(end, 1e-9), bins + 1)
    z = np.zeros((len(memory), bins), dtype=np.float32)
    for row, m in enumerate(memory):
        times = np.asarray(m.times, dtype=float)
        total = np.asarray(m.activations, dtype=np.int64) + np.asarray(m.receive_buffers)
        # The value holding at each bin's start, then every change inside the bin.
        at_start = total[np.clip(np.searchsorted(times, edges[:-1], side="right") - 1, 0, None)]
        z[row] = at_start
        inside = np.clip(np.searchsorted(edges, times, side="right") - 1, 0, bins - 1)
        np.maximum.at(z[row], inside, total.astype(np.float32))
    return z, edges


def _overview(memory: Sequence[RankMemory], unit: str) -> go.Figure:
    z, edges = binned_totals(memory)
    ranks = np.array([m.rank for m in memory])
    top = max(memory, key=lambda m: (m.peak, -m.rank))
    fig = go.Figure(
        go.Heatmap(
            name="in use",
            z=z,
            x=(edges[:-1] + edges[1:]) / 2,
            y=ranks,
            zmin=0,
            colorscale=[[0, "#ffffff"], [0.5, "#9ecae1"], [1.0, ACTIVATION]],
            colorbar=dict(title=dict(text="micro-<br>batches"), thickness=12, len=0.6),
            hovertemplate=f"rank %{{y}} · ≈ %{{x:.1f}} {unit}<br>up to %{{z}} micro-batches in use<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            name="peak",
            x=np.array([m.peak_time for m in memory]),
            y=ranks,
            mode="markers",
            marker=dict(color=HAZARD, size=6, symbol="diamond"),
            customdata=np.array([m.peak for m in memory]),
            hovertemplate=f"rank %{{y}} peaks at %{{customdata}} micro-batches at %{{x:g}} {unit}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text=unit)
    fig.update_yaxes(title_text="rank", autorange="reversed")
    fig.update_layout(
        title=dict(
            text=f"{TITLE}<br><sup>{len(memory)} ranks, largest in each of {z.shape[1]} time bins; "
            f"highest peak: rank {top.rank}, {top.peak} at {top.peak_time:g} {unit}, "
            f"after {top.peak_words()}</sup>"
        ),
        height=max(320, min(900, 8 * len(memory) + 160)),
        showlegend=False,
    )
    return fig


def empty_memory_figure(reason: str) -> go.Figure:
    """The memory view when there is no timeline to read it from (a deadlocked schedule)."""
    fig = go.Figure()
    fig.update_layout(title=dict(text=f"{TITLE}<br><sup>{reason}</sup>"), height=200)
    return fig


__all__ = [
    "MAX_ROWS",
    "OVERVIEW_BINS",
    "memory_figure",
    "binned_totals",
    "empty_memory_figure",
]
