"""Every size at once: a stages x micro-batches map of verdicts, the smallest failing size outlined.

One cell per size that was checked, coloured by its worst kind of finding (clean, hazard,
unmatched or mismatched exchange, deadlock; grey where the size does not apply to the
schedule), hover naming the first finding in words. The smallest failing size, the case to
debug first, is outlined; clicking a cell in the explorer loads that size.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from explorer.pipeline.analysis.sizes import SizeCell, SizeSweep
from explorer.pipeline.views.bars import rectangles
from explorer.pipeline.views.grid import _wrap
from explorer.pipeline.views.palette import HAZARD, SELECTED

VERDICTS = ("clean", "hazard", "unmatched or mismatched", "deadlock", "does not apply")
COLOURS = ("#8fd18f", HAZARD, "#ff9f4a", "#6a3d9a", "#dddddd")


def verdict(cell: SizeCell) -> int:
    """Index into :data:`VERDICTS`: the worst kind of finding at that size."""
    if cell.skipped:
        return 4
    if cell.deadlocks:
        return 3
    if cell.mismatches or cell.unmatched:
        return 2
    return 1 if cell.hazards else 0


def sizes_figure(sweep: SizeSweep, title: str = "", stale: str = "") -> go.Figure:
    """The verdict map of ``sweep`` (see the module docstring). ``stale`` says why the map no
    longer describes what the page shows above it: the map is faded and the sentence is its
    subtitle, so nobody reads an earlier schedule's verdicts as the current one's."""
    stages = sorted({c.stages for c in sweep.cells})
    mbs = sorted({c.microbatches for c in sweep.cells})
    row = {p: i for i, p in enumerate(stages)}
    col = {m: j for j, m in enumerate(mbs)}
    z = np.full((len(stages), len(mbs)), np.nan, dtype=np.float32)
    hover = np.full((len(stages), len(mbs)), "", dtype=object)
    for c in sweep.cells:
        v = verdict(c)
        z[row[c.stages], col[c.microbatches]] = v
        words = (
            c.skipped
            if c.skipped
            else (c.first_words or "clean: no hazard, mismatch, deadlock or wrong gradient count")
        )
        hover[row[c.stages], col[c.microbatches]] = _wrap(
            f"{c.stages} stages x {c.microbatches} micro-batches: {words}", 80
        )
    n = len(VERDICTS)
    scale = [
        x for i, colour in enumerate(COLOURS) for x in ([i / n, colour], [(i + 1) / n, colour])
    ]
    fig = go.Figure(
        go.Heatmap(
            name="verdicts",
            z=z,
            x=mbs,
            y=stages,
            zmin=-0.5,
            zmax=n - 0.5,
            colorscale=scale,
            showscale=False,
            xgap=1,
            ygap=1,
            customdata=hover,
            hoverongaps=False,
            hovertemplate="%{customdata}<extra></extra>",
        )
    )
    present = {verdict(c) for c in sweep.cells}
    for i in sorted(present):  # legend entries for the verdicts on the map
        fig.add_trace(
            go.Scatter(
                name=VERDICTS[i],
                x=[None],
                y=[None],
                mode="markers",
                hoverinfo="skip",
                marker=dict(symbol="square", size=11, color=COLOURS[i]),
            )
        )
    worst = sweep.smallest_failing
    if worst is not None:
        x0 = np.array([worst.microbatches - 0.5])
        y0 = np.array([worst.stages - 0.5])
        xs, ys = rectangles(x0, x0 + 1, y0, y0 + 1)
        fig.add_trace(
            go.Scatter(
                name=f"smallest failing: {worst.stages}x{worst.microbatches}",
                x=xs,
                y=ys,
                mode="lines",
                line=dict(color=SELECTED, width=3),
                hoverinfo="skip",
            )
        )
    head = title or "Every size"
    if stale:
        fig.update_traces(opacity=0.3)
        fig.add_annotation(
            text="earlier settings",
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
            font=dict(size=28, color="#888"),
        )
    sub = (
        f"<br><sup>⚠ {_wrap(stale, 140)}</sup>"
        if stale
        else (
            f"<br><sup>smallest failing size {worst.stages}x{worst.microbatches} outlined; "
            "click a cell to load that size</sup>"
            if worst
            else "<br><sup>click a cell to load that size</sup>"
        )
    )
    fig.update_layout(
        title=dict(
            text=f"{head} · {sweep.describe().splitlines()[0]}" + sub,
            font=dict(size=13),
        ),
        height=int(min(700, max(280, 16 * len(stages) + 160))),
        margin=dict(l=10, r=10, t=70, b=40),
        plot_bgcolor="white",
        legend=dict(font=dict(size=10)),
        xaxis=dict(title="micro-batches", showgrid=False, zeroline=False),
        yaxis=dict(
            title="stages",
            autorange="reversed",
            showgrid=False,
            zeroline=False,
            dtick=1 if len(stages) <= 24 else None,
        ),
    )
    return fig


__all__ = ["VERDICTS", "COLOURS", "verdict", "sizes_figure"]
