"""Measured versus simulated, on one time axis in seconds, and where the time went.

After a run (or with a loaded trace) the simulation is re-costed from that measurement
(:func:`explorer.pipeline.analysis.measured.measured_vs_simulated`, which this figure draws:
per rank and per kind), so both lanes are in seconds and what still differs is the schedule's
doing, not a unit. Each rank row holds the
simulated lane (faded, above) and the measured one (solid, below); a send or receive is split
into the time spent *waiting* for its partner (hatched) and the transfer itself (its kind's
colour). A second panel says where each rank's iteration went (compute, transfer, waiting,
other work, idle) for both, which is what explains a large measured bubble on CPU/gloo; the
last compares the mean duration per instruction kind. The legend names the kinds.

Rows are ranks (a process is what runs in time). Measured rows are matched to simulated ones
by ``(stage, kind, micro-batch)`` because a profiler does not know DeepSpeed's steps. Without
a trace the figure is the simulated lane in ticks with a note saying how to get a measurement.
The figure only draws: every number comes analysed in a :class:`MeasuredVsSimulated`.
"""

from __future__ import annotations

import textwrap
from typing import Optional

import numpy as np
import plotly.graph_objects as go

from explorer.pipeline.analysis.breakdown import CATEGORIES
from explorer.pipeline.analysis.measured import KindMeans, Lane, MeasuredVsSimulated
from explorer.pipeline.analysis.timeline import Timeline
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.views.axes import rank_labels
from explorer.pipeline.views.bars import MAX_SVG_BARS, hbars
from explorer.pipeline.views.palette import (
    IDLE_SOLID,
    KIND_COLOURS,
    discrete_colorscale,
    kind_label,
)
from explorer.pipeline.views.raster import dominant, window

#: Said under the title, not over the lanes (centred on them it hid the simulated bars).
EMPTY_NOTE = (
    "No measured trace yet: press Run (a runner launches the real pipeline) "
    "or pass a trace to show_trace (e.g. explorer.pipeline.traces.read_chrome_trace)."
)
WAITING = "rgba(120, 120, 120, 0.55)"
CATEGORY_COLOURS = {
    "compute": KIND_COLOURS[Kind.FORWARD],
    "transfer": KIND_COLOURS[Kind.RECV_ACTIVATION],
    "waiting": "#d98b8b",
    "other": "#7f7f7f",
    "idle": IDLE_SOLID,
    "stopped": "#3b3b3b",
}
_MAX_RANK_ROWS = 16


#: Where each lane sits on its rank's row and how solid it is: simulated faded above, measured below.
_LANE_STYLE = {"simulated": (-0.2, 0.45), "measured": (0.2, 1.0)}


def overlay_figure(
    analysed: MeasuredVsSimulated,
    *,
    max_bars: int = MAX_SVG_BARS,
    x_range: Optional[tuple[float, float]] = None,
) -> go.Figure:
    """Simulated and (when measured) measured lanes per rank, where the time went, and mean duration per kind."""
    s = analysed.report.schedule
    fig = go.Figure()
    tl = analysed.timeline
    if analysed.problem or tl is None:
        fig.update_layout(
            title=dict(text=f"Measured vs simulated · {analysed.problem}"),
            height=300,
        )
        return fig
    unit = analysed.unit
    lanes = analysed.lanes
    span = max(float(max(lane.end.max(initial=0.0) for lane in lanes)), 1e-12)
    lo, hi = window(x_range, 0.0, span)
    overview = sum(int(((lane.end >= lo) & (lane.start <= hi)).sum()) for lane in lanes) > max_bars
    for lane in lanes:
        (_overview_lane if overview else _lane)(fig, lane, s.num_ranks, (lo, hi), unit, max_bars)
    for kind in (
        k for k in Kind if (s.kind == k).any()
    ):  # one legend entry per kind, for both lanes
        fig.add_trace(
            go.Scatter(
                name=kind_label(kind),
                x=[None],
                y=[None],
                mode="markers",
                legendgroup=kind.code,
                marker=dict(symbol="square", size=11, color=KIND_COLOURS[kind]),
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            name="waiting for the partner",
            x=[None],
            y=[None],
            mode="markers",
            legendgroup="waiting",
            marker=dict(symbol="square", size=11, color=WAITING),
            hoverinfo="skip",
        )
    )
    _where_time_went(fig, list(analysed.parts))
    if analysed.kind_means is not None:
        _per_kind(fig, analysed.kind_means, unit)
    fig.update_layout(**_layout(s, tl, analysed.trace, unit, (lo, hi), analysed.words, overview))
    return fig


def _lane(fig: go.Figure, lane: Lane, ranks: int, xr: tuple, unit: str, max_bars: int) -> None:
    """Bars of one lane (simulated or measured): waiting hatched, the rest in the kind's colour."""
    rank, kind, start, end, wait, mb = (
        lane.rank,
        lane.kind,
        lane.start,
        lane.end,
        lane.wait,
        lane.microbatch,
    )
    label, (dy, opacity) = lane.label, _LANE_STYLE[lane.label]
    near = (end >= xr[0]) & (start <= xr[1]) & (end > start)
    for k in Kind:
        idx = np.nonzero(near & (kind == k))[0]
        if not len(idx):
            continue
        hover = [
            f"{label} rank {r} · {k.code}{m if m >= 0 else ''}: {a:.4g} → {b:.4g} {unit}"
            + (f" (waited {w:.3g} for the partner)" if w > 0 else "")
            for r, m, a, b, w in zip(
                rank[idx].tolist(),
                mb[idx].tolist(),
                start[idx].tolist(),
                end[idx].tolist(),
                wait[idx].tolist(),
            )
        ]
        bar = hbars(
            f"{label} {k.code}",
            rank[idx] + dy,
            start[idx] + wait[idx],
            end[idx],
            KIND_COLOURS[k],
            hover=hover,
            width=0.36,
            max_bars=max_bars,
            opacity=opacity,
            showlegend=False,
        )
        bar.update(legendgroup=k.code)
        fig.add_trace(bar)
    waited = np.nonzero(near & (wait > 0))[0]
    if len(waited):
        bar = hbars(
            f"{label} waiting",
            rank[waited] + dy,
            start[waited],
            start[waited] + wait[waited],
            WAITING,
            hover=[
                f"{label} rank {r}: waiting {w:.3g} {unit} for the partner"
                for r, w in zip(rank[waited].tolist(), wait[waited].tolist())
            ],
            width=0.36,
            max_bars=max_bars,
            opacity=opacity,
            showlegend=False,
        )
        bar.update(legendgroup="waiting")
        if isinstance(bar, go.Bar):
            bar.update(marker_pattern_shape="/")
        fig.add_trace(bar)


def _overview_lane(
    fig: go.Figure, lane: Lane, ranks: int, xr: tuple, unit: str, max_bars: int
) -> None:
    """A lane with too many bars to draw: the kind that runs most of each column, per rank."""
    rank, kind, start, end = lane.rank, lane.kind, lane.start, lane.end
    label, (dy, opacity) = lane.label, _LANE_STYLE[lane.label]
    r = dominant(rank, start, end, kind, ranks, xr, num_categories=len(Kind))
    fig.add_trace(
        go.Heatmap(
            name=f"{label} (overview)",
            z=r.z.astype(np.float32),
            x=r.centres,
            y=np.arange(ranks) + dy,
            dy=1.0,
            zmin=-0.5,
            zmax=len(Kind) - 0.5,
            colorscale=discrete_colorscale(),
            showscale=False,
            opacity=opacity,
            hoverongaps=False,
            ygap=0,
            hovertemplate=f"{label} · row %{{y:.0f}} · t ≈ %{{x:.4g}} {unit}: zoom in for each instruction<extra></extra>",
        )
    )


def _where_time_went(fig: go.Figure, parts: list) -> None:
    """Stacked shares per rank (simulated above measured) in the middle panel."""
    labels = ("simulated", "measured")
    many = len(parts[0].ranks) > _MAX_RANK_ROWS
    ys, shares = [], []
    for label, part in zip(labels, parts):
        if many:  # one bar per lane: the mean over ranks
            mean = {
                c: float(np.mean([part.share(i)[c] for i in range(len(part.ranks))]))
                for c in CATEGORIES
            }
            ys.append(f"{label}, mean of {len(part.ranks)} ranks")
            shares.append(mean)
        else:
            for i, r in enumerate(part.ranks):
                ys.append(f"rank {r} {label}")
                shares.append(part.share(i))
    base = np.zeros(len(ys))
    for c in CATEGORIES:
        x = np.array([sh[c] for sh in shares])
        if c == "stopped" and not x.any():
            continue  # only failed runs have ranks that stopped early
        fig.add_trace(
            go.Bar(
                name=c,
                orientation="h",
                y=ys,
                x=x,
                base=base.copy(),
                marker=dict(color=CATEGORY_COLOURS[c]),
                text=[f"{v:.0%}" if v >= 0.06 else "" for v in x],
                textposition="inside",
                insidetextanchor="middle",
                legendgroup=f"share-{c}",
                legendgrouptitle=None,
                hovertemplate=f"%{{y}}: {c} %{{x:.1%}}<extra></extra>",
                xaxis="x2",
                yaxis="y2",
                showlegend=True,
            )
        )
        base += x


def _per_kind(fig: go.Figure, means: KindMeans, unit: str) -> None:
    """Mean duration per instruction kind, simulated beside measured."""
    kinds, sim = means.kinds, list(means.simulated)
    fig.add_trace(
        go.Bar(
            name="mean, simulated",
            x=[kind_label(k) for k in kinds],
            y=sim,
            offset=-0.4,
            width=0.4,
            marker=dict(color="#bbbbbb"),
            xaxis="x3",
            yaxis="y3",
            hovertemplate=f"%{{x}}: simulated mean %{{y:.4g}} {unit}<extra></extra>",
        )
    )
    if means.measured is not None:
        meas = list(means.measured)
        fig.add_trace(
            go.Bar(
                name="mean, measured",
                x=[kind_label(k) for k in kinds],
                y=meas,
                offset=0.0,
                width=0.4,
                marker=dict(color="#444444"),
                xaxis="x3",
                yaxis="y3",
                hovertext=[f"measured − simulated: {m - v:+.3g} {unit}" for m, v in zip(meas, sim)],
                hovertemplate=f"%{{x}}: measured mean %{{y:.4g}} {unit}<br>%{{hovertext}}<extra></extra>",
            )
        )


#: Characters per line of a note above a panel: plotly does not wrap annotations, and a longer
#: line ran under the legend on the right at widths of 1500 px and less.
NOTE_WIDTH = 100


def wrapped(text: str, width: int = NOTE_WIDTH) -> str:
    """``text`` broken at spaces into lines of at most ``width`` characters (plotly's ``<br>``)."""
    return "<br>".join(textwrap.wrap(text, width)) or text


def _layout(
    s: Schedule,
    tl: Timeline,
    trace: Optional[MeasuredTrace],
    unit: str,
    xr: tuple,
    words: str,
    overview: bool,
) -> dict:
    ranks = s.num_ranks
    share_rows = 2 if ranks > _MAX_RANK_ROWS else ranks * (2 if trace is not None else 1)
    # Heights in pixels, bottom up: per-kind panel, gap, shares, gap, lanes; then margins.
    per_rank = (
        44.0 if ranks <= 8 else max(14.0, 352.0 / ranks)
    )  # many ranks: the lanes get thinner, not the page longer
    bottom, gap, middle, top = (
        170.0,
        85.0,
        share_rows * 22.0 + 10.0,
        min(ranks, 64) * per_rank + 20.0,
    )
    plot = bottom + gap + middle + gap + top
    height = plot + 90.0 + 110.0  # title and legend above, rotated kind names below
    y3 = (0.0, bottom / plot)
    y2 = ((bottom + gap) / plot, (bottom + gap + middle) / plot)
    y1 = ((bottom + 2 * gap + middle) / plot, 1.0)
    if trace is None:
        title = f"Measured vs simulated · simulated only (ticks)<br><sup>{EMPTY_NOTE}</sup>"
    else:
        title = (
            f"Measured vs simulated · {len(trace)} measured instructions from {_source(trace.source)}<br>"
            f"<sup>simulation re-costed from this measurement · makespan simulated {tl.makespan * 1e-3:.4g} s, "
            f"measured {float(trace.end.max() - trace.start.min()):.4g} s</sup>"
        )
    panel = dict(
        xref="paper",
        yref="paper",
        x=0.0,
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        font=dict(size=12),
    )
    notes = [
        dict(
            text="per rank: simulated (faded, above) and measured (below)"
            + (" · overview: zoom in for each instruction" if overview else ""),
            y=y1[1] + 8.0 / plot,
            **panel,
        ),
        dict(
            text=wrapped(f"where the time went{': ' + words if words else ''}"),
            y=y2[1] + 8.0 / plot,
            **panel,
        ),
        dict(text=f"mean duration per instruction kind ({unit})", y=y3[1] + 8.0 / plot, **panel),
    ]
    return dict(
        title=dict(text=title, font=dict(size=14)),
        barmode="overlay",
        height=int(height),
        margin=dict(l=10, r=10, t=90, b=110),
        plot_bgcolor="white",
        showlegend=True,
        legend=dict(font=dict(size=10), tracegroupgap=2),
        annotations=notes,
        xaxis=dict(
            anchor="y",
            domain=[0, 1],
            range=list(xr),
            title=dict(text=f"time ({unit})", standoff=4),
            ticksuffix=" s" if unit == "s" else "",
            exponentformat="SI",
            showgrid=True,
            gridcolor="#eee",
        ),
        yaxis=dict(
            anchor="x",
            domain=list(y1),
            tickvals=list(range(ranks)),
            ticktext=rank_labels(s),
            range=[ranks - 0.5, -0.5],
            showgrid=False,
        ),
        xaxis2=dict(
            anchor="y2",
            domain=[0, 1],
            range=[0, 1],
            tickformat=".0%",
            showgrid=True,
            gridcolor="#eee",
        ),
        yaxis2=dict(anchor="x2", domain=list(y2), autorange="reversed", automargin=True),
        xaxis3=dict(anchor="y3", domain=[0, 1]),
        yaxis3=dict(
            anchor="x3",
            domain=list(y3),
            title=dict(text=unit),
            ticksuffix=" s" if unit == "s" else "",
            exponentformat="SI",
        ),
    )


def _source(source: str) -> str:
    """Where a trace came from, without a temporary folder's path (which says nothing to a reader)."""
    if not source:
        return "a trace"
    name = source.rstrip("/").rsplit("/", 1)[-1]
    return "a real run" if name.startswith("explorer-run-") else name


__all__ = ["EMPTY_NOTE", "WAITING", "CATEGORY_COLOURS", "overlay_figure"]
