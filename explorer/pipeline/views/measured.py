"""A measured iteration across ranks: the critical path drawn, receives split, bubble per rank.

Figures are pure functions of the measured trace and of :mod:`explorer.pipeline.analysis.measured`'s results,
so tests read them from ``fig.to_dict()``. Times are milliseconds from the iteration's start.

- :func:`critical_path_figure`: one row per rank; every compute as a bar (faded off the path,
  solid on it), the time a compute sat blocked on its input split into *waiting* (the partner had
  not yet sent) and *transfer* (sent, not yet arrived), and each send/receive edge the path
  crosses drawn as an arrow from the producer's send to the consumer, with the sentence as hover.
- :func:`bubble_figure`: each rank's idle time over both denominators side by side, labelled,
  because tools disagree on which one "the bubble" is.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explorer.pipeline.schedules.instructions import KIND_BY_CODE, Kind
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.views.palette import KIND_COLOURS

WAITING = "#d98b8b"
TRANSFER = "#8bb8d9"
PATH_EDGE = "#d62728"
_COMPUTE = ("F", "B", "I", "W")


def _ms(x: float) -> float:
    return x * 1e3


def critical_path_figure(trace: MeasuredTrace, path: dict, waits: Sequence[dict]) -> go.Figure:
    """Computes per rank, the path highlighted, blocked time split, crossing edges as arrows."""
    fig = go.Figure()
    on_path = {(s["rank"], s["action"]) for s in path["steps"]}
    rank, kind_of, action = trace.rank.tolist(), trace.kind.tolist(), trace.action.tolist()
    start, end, wait = trace.start.tolist(), trace.end.tolist(), trace.wait.tolist()
    for highlighted in (False, True):
        for code in _COMPUTE:
            kind = KIND_BY_CODE[code]
            mine = [
                i
                for i in range(len(trace))
                if kind_of[i] == kind and ((rank[i], action[i]) in on_path) == highlighted
            ]
            if not mine:
                continue
            fig.add_trace(
                go.Bar(
                    name=f"{code} {'on the critical path' if highlighted else 'off the path'}",
                    orientation="h",
                    y=[f"rank {rank[i]}" for i in mine],
                    base=[_ms(start[i] + wait[i]) for i in mine],
                    x=[_ms(end[i] - start[i] - wait[i]) for i in mine],
                    text=[action[i] for i in mine],
                    textposition="none",
                    marker=dict(
                        color=KIND_COLOURS[kind],
                        opacity=1.0 if highlighted else 0.3,
                        line=dict(color=PATH_EDGE if highlighted else "rgba(0,0,0,0)", width=2),
                    ),
                    hovertemplate="%{text}: %{base:.3f} ms + %{x:.3f} ms<extra></extra>",
                )
            )
    for part, colour in (("waiting", WAITING), ("transfer", TRANSFER)):
        fig.add_trace(
            go.Bar(
                name=f"blocked: {part}"
                + (" (partner had not sent)" if part == "waiting" else " (sent, not arrived)"),
                orientation="h",
                y=[f"rank {w['rank']}" for w in waits],
                base=[
                    _ms(w["needed"] + (0.0 if part == "waiting" else w["waiting"])) for w in waits
                ],
                x=[_ms(w[part]) for w in waits],
                text=[f"{w['action']} <- {w['from_action']}" for w in waits],
                textposition="none",
                marker=dict(color=colour),
                hovertemplate="%{text}: %{x:.3f} ms " + part + "<extra></extra>",
            )
        )
    xs, ys, hover = [], [], []
    for s, sentence in zip((s for s in path["steps"] if s["via"] == "receive"), path["sentences"]):
        xs += [_ms(s["sent"]), _ms(s["start"] + s["waited_s"]), None]
        ys += [f"rank {s['from_rank']}", f"rank {s['rank']}", None]
        hover += [sentence, sentence, None]
    fig.add_trace(
        go.Scatter(
            name="critical path: send/receive edge",
            x=xs,
            y=ys,
            mode="lines+markers",
            line=dict(color=PATH_EDGE, width=2),
            marker=dict(symbol="arrow", angleref="previous", size=10, color=PATH_EDGE),
            text=hover,
            hovertemplate="%{text}<extra></extra>",
        )
    )
    ranks = sorted(set(rank))
    fig.update_layout(
        title=dict(text=_title(path)),
        barmode="overlay",
        xaxis=dict(title="ms from the iteration's start"),
        yaxis=dict(
            categoryorder="array",
            categoryarray=[f"rank {r}" for r in reversed(ranks)],
            title="rank",
        ),
        height=max(260, 90 * len(ranks) + 120),
        legend=dict(orientation="h", y=-0.4),
    )
    return fig


def _title(path: dict) -> str:
    if not path["steps"]:
        return "Critical path: nothing placed"
    return (
        f"Critical path: {len(path['steps'])} computes, {path['length_s'] * 1e3:.3g} ms, "
        f"{path['waited_s'] * 1e3:.3g} ms waiting for data"
    )


def bubble_figure(bubble: Sequence[dict]) -> go.Figure:
    """Idle time per rank as a share of the iteration (left) and of the rank's own compute (right)."""
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(
            "idle / iteration (share of total time)",
            "idle / the rank's compute (share of ideal time)",
        ),
    )
    ranks = [f"rank {b['rank']}" for b in bubble]
    fig.add_trace(
        go.Bar(
            name="share of the iteration",
            x=ranks,
            y=[b["share_of_iteration"] for b in bubble],
            marker=dict(color=KIND_COLOURS[Kind.FORWARD]),
            hovertemplate="%{x}: %{y:.1%} of the iteration<extra></extra>",
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(
            name="over the rank's compute",
            x=ranks,
            y=[b["share_of_compute"] for b in bubble],
            marker=dict(color=KIND_COLOURS[Kind.BACKWARD]),
            hovertemplate="%{x}: %{y:.2f}x its compute<extra></extra>",
        ),
        row=1,
        col=2,
    )
    fig.update_yaxes(tickformat=".0%", range=[0, 1], row=1, col=1)
    fig.update_layout(title=dict(text="Measured bubble per rank, both denominators"), height=320)
    return fig


__all__ = ["bubble_figure", "critical_path_figure"]
