"""Views of a job followed while it runs: the grid with the failure pinned, progress per rank.

Pure functions of data (a :class:`~explorer.pipeline.analysis.check.Report` of the schedule the ranks
ran, the failure record, the per-rank progress); the follower widget redraws them as lines
arrive. The failure is pinned where it happened: its cell outlined as the selection and a
marker with the rank and DeepSpeed's exception, so it reads at a glance on the grid itself.
A hang's verdict is pinned the same way (:func:`verdict_grid`): the cell of each rank that waits,
the cell of the rank they wait on, and an arrow from each waiter to the cell it waits on, so a
wait-for cycle is drawn as the loop it is.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, cast

import plotly.graph_objects as go

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.analysis.hang import HangVerdict
from explorer.pipeline.views.grid import grid_figure
from explorer.pipeline.views.marks import contract_marks
from explorer.pipeline.views.palette import HAZARD

__all__ = ["failure_cell", "pinned_grid", "progress_figure", "verdict_cells", "verdict_grid"]


def failure_cell(failure: Optional[dict]) -> Optional[tuple[int, int]]:
    """``(stage, step)`` of a failure that happened at an instruction; None otherwise."""
    if not failure or failure.get("stage") is None or failure.get("step") is None:
        return None
    return int(failure["stage"]), int(failure["step"])


def verdict_cells(verdict: HangVerdict) -> dict[int, tuple[int, int]]:
    """``rank -> (stage, step)`` of every rank the verdict names (the cycle, or the waiters and
    the rank they wait on) that it could place in the schedule."""
    named = verdict.cycle or (
        *verdict.waiting,
        *(() if verdict.culprit is None else (verdict.culprit,)),
    )
    out = {}
    for rank in named:
        at = verdict.state(rank).at
        if at is not None:
            out[rank] = (at.stage, at.step)
    return out


def verdict_grid(report: Report, verdict: HangVerdict) -> go.Figure:
    """The grid with a hang's verdict pinned: the named ranks' cells marked, each wait an arrow."""
    cells = verdict_cells(verdict)
    culprit = cells.get(verdict.culprit) if verdict.culprit is not None else None
    fig = grid_figure(report, selected=culprit)
    if cells:
        ranks = sorted(cells)
        fig.add_trace(
            go.Scatter(
                x=[cells[r][1] for r in ranks],
                y=[cells[r][0] for r in ranks],
                mode="markers",
                name="hang",
                marker=dict(
                    symbol=["x" if r == verdict.culprit else "circle-open" for r in ranks],
                    size=14,
                    color=HAZARD,
                    line=dict(width=2.5, color=HAZARD),
                ),
                hovertext=[verdict.state(r).describe() for r in ranks],
                hoverinfo="text",
                showlegend=False,
            )
        )
    for waiter, waited in _waits(verdict):
        if waiter in cells and waited in cells:
            (ys, xs), (yt, xt) = cells[waiter], cells[waited]
            fig.add_annotation(
                x=xt, y=yt, ax=xs, ay=ys, xref="x", yref="y", axref="x", ayref="y",
                showarrow=True, arrowhead=3, arrowwidth=2, arrowcolor=HAZARD, text="",
            )  # fmt: skip
    return _said_in_title(
        fig, f"<span style='color:{HAZARD}'>HUNG: {_short(verdict.describe())}</span>"
    )


def _waits(verdict: HangVerdict) -> list[tuple[int, int]]:
    """The waits the verdict names: around the cycle, or from each waiter to the culprit."""
    if verdict.cycle:
        loop = verdict.cycle
        return [(loop[i], loop[(i + 1) % len(loop)]) for i in range(len(loop))]
    if verdict.culprit is None:
        return []
    return [(r, verdict.culprit) for r in verdict.waiting]


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pinned_grid(report: Report, failure: Any = None, contract: Sequence[dict] = ()) -> go.Figure:
    """The grid of the schedule as run, with ``failure`` (when it has a cell) pinned on it and
    every message of ``contract`` (the run's P2P contract violations, as dicts) marked at its
    receive like a hazard."""
    if failure is not None and hasattr(failure, "to_dict"):  # a Failure record
        failure = failure.to_dict()
    cell = failure_cell(failure)
    fig = grid_figure(report, selected=cell, marks=contract_marks(contract))
    if cell is None:
        return fig
    stage, step = cell
    what = failure.get("exception_type") or failure.get("kind") or "failed"
    fig.add_trace(
        go.Scatter(
            x=[step],
            y=[stage],
            # The words are in the title and the hover: drawn above the cell they covered the
            # neighbouring cells' instructions.
            mode="markers",
            name="failure",
            marker=dict(symbol="x", size=14, color=HAZARD, line=dict(width=1.5, color="white")),
            text=[f"rank {failure.get('rank')}: {what}"],
            hovertext=[
                f"rank {failure.get('rank')}: {what}<br>{str(failure.get('message', ''))[:300]}"
            ],
            hoverinfo="text",
            showlegend=False,
        )
    )
    said = (
        f"<span style='color:{HAZARD}'>rank {failure.get('rank')} FAILED at stage {stage}, "
        f"step {step}: {failure.get('instruction')} ({what})</span>"
    )
    return _said_in_title(fig, said)


def _said_in_title(fig: go.Figure, said: str) -> go.Figure:
    """``said`` on the title's small line. The grid's title ends with a <sup> line (the steps
    shown); said after it, a failure was drawn on top of that line: it goes after the steps."""
    layout = cast(go.Layout, fig.layout)  # plotly's getter is unannotated
    title = layout.title.text or ""
    if title.endswith("</sup>"):
        title = f"{title[: -len('</sup>')]} · {said}</sup>"
    else:
        title = f"{title}<br><sup>{said}</sup>"
    fig.update_layout(title=dict(text=title))
    return fig


def progress_figure(
    ranks: Sequence[dict], steps: int, iterations: Optional[int] = None
) -> go.Figure:
    """One bar per rank: steps done in its current iteration (colour: its state, see
    :func:`~explorer.pipeline.traces.follow.rank_state`)."""
    colours = {
        "running": "#1f77b4",
        "done": "#2ca02c",
        "failed": HAZARD,
        "starting": "#999999",
        "stopped": "#3b3b3b",  # wrote no end: killed when a neighbour failed, or the job ended
    }
    labels = [f"rank {r['rank']}" for r in ranks]
    done = [max(r.get("last_step", -1) + 1, 0) for r in ranks]
    text = [
        f"{r.get('state')} · iteration {max(r.get('iteration', -1), 0)}"
        + (f"/{iterations}" if iterations else "")
        + f" · step {r.get('last_step', -1)}"
        for r in ranks
    ]
    fig = go.Figure(
        go.Bar(
            x=done,
            y=labels,
            orientation="h",
            marker_color=[colours.get(str(r.get("state")), "#999999") for r in ranks],
            text=text,
            textposition="auto",
            name="progress",
        )
    )
    fig.update_layout(
        title=dict(text="Progress per rank (steps of the current iteration)"),
        xaxis=dict(range=[0, max(steps, 1)], title="step"),
        yaxis=dict(autorange="reversed"),
        height=80 + 30 * max(len(ranks), 1),
        margin=dict(l=60, r=20, t=40, b=40),
    )
    return fig
