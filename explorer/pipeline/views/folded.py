"""The folded job: one lane per stage, each instruction its replicas' median with their spread,
the outlier ranks as marks; and one rank's own lane, which a click on its mark opens.

The figure's size follows the pipeline (stages x instructions), never the rank count, so a job
of 8,192 ranks draws as fast as one replica. Bars are the median duration at the median start;
the thin line through a bar runs from the fastest replica's duration to the slowest's. An
outlier's mark sits at the end of the stage's first cell of its kind in the iteration it began
to be slow; its hover text is the fold's sentence. The critical path of the slowest replica
(:mod:`explorer.pipeline.analysis.fold_path`), when given, is a line through the cells it visits,
in the order it visits them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.pipeline.analysis.fold import Outlier
from explorer.pipeline.analysis.fold_lanes import Lanes, RankLane
from explorer.pipeline.analysis.fold_path import FoldedPath
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.views.axes import row_height
from explorer.pipeline.views.bars import hbars
from explorer.pipeline.views.palette import HAZARD, KIND_COLOURS, kind_label

#: The outlier marks' trace name: a click on one of its points opens that rank's lane.
OUTLIERS = "outlier ranks (click one: its own lane)"
SPREAD = "replicas: fastest to slowest"
PATH = "critical path (slowest replica)"
_MS = 1e3
#: Legends sit between the title and the plot: below it they covered the axis title at small heights.
_ABOVE = dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left")


def folded_figure(
    lanes: Lanes,
    outliers: Sequence[Outlier],
    replicas: int,
    ranks: int,
    path: FoldedPath | None = None,
) -> go.Figure:
    """Stages as lanes, each cell its median bar and its spread, outliers as marks, and the
    slowest replica's critical path through the cells."""
    fig = go.Figure()
    y = lanes.stage.astype(float)
    start = lanes.start * _MS
    for code in sorted(set(lanes.kind.tolist())):
        kind = Kind(code)
        pick = lanes.kind == code
        fig.add_trace(
            hbars(
                kind_label(kind),
                y[pick],
                start[pick],
                start[pick] + lanes.median[pick] * _MS,
                KIND_COLOURS[kind],
                hover=_hover(lanes, pick, kind),
            )
        )
    fig.add_trace(_spread(y, start + lanes.low * _MS, start + lanes.high * _MS))
    if path is not None and len(path):
        fig.add_trace(_path(lanes, path))
    mark_x, mark_y = _marks(lanes, outliers)
    fig.add_trace(
        go.Scatter(
            name=OUTLIERS,
            x=mark_x,
            y=mark_y,
            mode="markers",
            marker=dict(symbol="x", size=13, color=HAZARD, line=dict(width=1.5, color="white")),
            customdata=[o.rank for o in outliers],
            hovertext=[o.sentence() for o in outliers],
            hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    stages = int(lanes.stage.max()) + 1 if len(lanes) else 0
    named = f"{len(outliers)} outlier rank{'s' if len(outliers) != 1 else ''}"
    fig.update_layout(
        title=_title(f"{ranks:,} ranks folded: {stages} stages x {replicas:,} replicas; {named}"),
        xaxis_title="ms from each rank's first instruction (median over replicas)",
        yaxis=dict(
            tickvals=list(range(stages)),
            ticktext=[f"stage {s}" for s in range(stages)],
            autorange="reversed",
        ),
        height=row_height(stages, per_row=48) + 60,
        barmode="overlay",
        legend=_ABOVE,
        margin=dict(l=70, r=20, t=130, b=50),
    )
    return fig


def rank_lane_figure(lane: RankLane, lanes: Lanes) -> go.Figure:
    """One rank's instructions above its stage's medians, on the same time base."""
    fig = go.Figure()
    stage = int(lane.stage[0]) if len(lane.stage) else -1
    theirs = lanes.stage == stage
    for code in sorted(set(lane.kind.tolist())):
        kind = Kind(code)
        mine, median = lane.kind == code, theirs & (lanes.kind == code)
        colour = KIND_COLOURS[kind]
        fig.add_trace(
            hbars(
                kind_label(kind),
                np.zeros(int(mine.sum())),
                lane.start[mine] * _MS,
                lane.end[mine] * _MS,
                colour,
            )
        )
        fig.add_trace(
            hbars(
                f"{kind_label(kind)} (stage median)",
                np.ones(int(median.sum())),
                lanes.start[median] * _MS,
                (lanes.start[median] + lanes.median[median]) * _MS,
                colour,
                opacity=0.45,
                showlegend=False,
            )
        )
    fig.update_layout(
        title=_title(f"rank {lane.rank}: its own lane, above its stage's median (stage {stage})"),
        xaxis_title="ms from the rank's first instruction",
        yaxis=dict(
            tickvals=[0, 1],
            ticktext=[f"rank {lane.rank}", f"stage {stage} median"],
            autorange="reversed",
        ),
        height=row_height(2, per_row=60) + 60,
        barmode="overlay",
        legend=_ABOVE,
        margin=dict(l=110, r=20, t=100, b=50),
    )
    return fig


def _path(lanes: Lanes, path: FoldedPath) -> go.Scatter:
    """The path through the folded cells it visits: across each cell, then on to the next."""
    n_mb = int(max(lanes.microbatch.max(initial=0), path.microbatch.max(initial=0))) + 2
    cell = {
        key: i
        for i, key in enumerate(
            zip(
                lanes.stage.tolist(),
                lanes.iteration.tolist(),
                lanes.kind.tolist(),
                (lanes.microbatch + 1).tolist(),
            )
        )
    }
    xs: list[float | None] = []
    ys: list[float | None] = []
    text: list[str] = []
    for i in range(len(path)):
        key = (int(path.stage[i]), path.iteration, int(path.kind[i]), int(path.microbatch[i]) + 1)
        at = cell.get(key)
        if at is None or n_mb <= 0:
            continue
        x0 = float(lanes.start[at]) * _MS
        said = f"rank {int(path.rank[i])} {kind_label(Kind(int(path.kind[i])))} mb {int(path.microbatch[i])}"
        xs += [x0, x0 + float(lanes.median[at]) * _MS]
        ys += [float(path.stage[i])] * 2
        text += [said, said]
    return go.Scatter(
        name=PATH,
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color="black", width=2),
        hovertext=text,
        hovertemplate="%{hovertext}<extra>critical path</extra>",
    )


def _spread(y: np.ndarray, low: np.ndarray, high: np.ndarray) -> go.Scatter:
    """Each cell's fastest-to-slowest segment, all in one SVG path: a WebGL trace would cost the
    page a GL context (most of a second in a software renderer) for a handful of lines."""
    gap = np.full(len(y), np.nan)
    return go.Scatter(
        name=SPREAD,
        x=np.column_stack([low, high, gap]).reshape(-1),
        y=np.column_stack([y, y, gap]).reshape(-1),
        mode="lines",
        line=dict(color="#333333", width=1.5),
        opacity=0.7,
        hoverinfo="skip",
        connectgaps=False,
    )


def _title(text: str) -> dict:
    """A title at the very top, clear of the legend under it."""
    return dict(text=text, x=0.01, xanchor="left", y=0.99, yref="container", yanchor="top")


def _hover(lanes: Lanes, pick: np.ndarray, kind: Kind) -> list[str]:
    cols = (lanes.stage, lanes.iteration, lanes.microbatch, lanes.median, lanes.low, lanes.high)
    out = []
    for s, it, mb, med, lo, hi, n, slow in zip(
        *(c[pick] for c in cols), lanes.count[pick], lanes.slowest_rank[pick]
    ):
        where = f"stage {s} {kind.deepspeed_name}" + (f" mb {mb}" if mb >= 0 else "")
        out.append(
            f"{where}, iteration {it}: median {med * _MS:.2f} ms "
            f"({lo * _MS:.2f} to {hi * _MS:.2f} ms over {n} replicas; slowest rank {slow})"
        )
    return out


def _marks(lanes: Lanes, outliers: Sequence[Outlier]) -> tuple[list[float], list[float]]:
    """Each outlier at the end of its stage's first cell of its kind in its first slow iteration."""
    xs, ys = [], []
    for o in outliers:
        pick = (
            (lanes.stage == o.stage)
            & (lanes.kind == int(o.kind))
            & (lanes.iteration == o.first_iteration)
        )
        if not pick.any():
            pick = (lanes.stage == o.stage) & (lanes.kind == int(o.kind))
        at = np.flatnonzero(pick)
        first = at[np.argmin(lanes.start[at])] if len(at) else None
        xs.append(
            float((lanes.start[first] + lanes.median[first]) * _MS) if first is not None else 0.0
        )
        ys.append(float(o.stage))
    return xs, ys


__all__ = ["OUTLIERS", "SPREAD", "folded_figure", "rank_lane_figure"]
