"""Buffer lifetimes: which micro-batch each buffer slot holds, step by step, and where a slot
is overwritten while still needed.

Rows are ``(stage, buffer)`` slots, x is steps in sub-step resolution
(:mod:`explorer.pipeline.analysis.lifetimes`): a blue bar while the slot holds a micro-batch's
activation, a green one while it holds the gradient ``SendGrad`` has yet to send. Two bars
overlapping on one row is a slot holding two micro-batches at once, i.e. an overwrite; each
hazard adds a red span from the overwriting instruction to the read that needed the old
content, with the finding in words on hover. The title compares allocated and needed buffers,
the number the seed thread was about.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from explorer.errors import InputError
from explorer.pipeline.analysis.check import Report
from explorer.pipeline.analysis.lifetimes import occupancy, substep_positions
from explorer.pipeline.views.axes import row_height
from explorer.pipeline.views.bars import MAX_SVG_BARS, hbars
from explorer.pipeline.views.grid import _wrap
from explorer.pipeline.views.palette import ACTIVATION, GRADIENT, HAZARD
from explorer.pipeline.views.raster import OVERVIEW_BINS, mean_count, window

_TEXT_BARS = 300
#: Above this many (stage, buffer) rows the all-stages view summarises per stage: 2,000 rows
#: of 0.4 px each show nothing but black bars.
MAX_SLOT_ROWS = 48


def lifetimes_figure(
    report: Report,
    stage: Optional[int] = None,
    *,
    max_bars: int = MAX_SVG_BARS,
    x_range: Optional[tuple[float, float]] = None,
) -> go.Figure:
    """Occupancy of every buffer slot of ``stage`` (all stages when None; per stage when they are many)."""
    s = report.schedule
    if stage is not None and not 0 <= stage < s.num_stages:
        raise InputError(
            f"stage {stage} does not exist: this schedule has stages 0..{s.num_stages - 1}"
        )
    occ = occupancy(s) if stage is None else occupancy(s).of_stage(stage)
    stages = range(s.num_stages) if stage is None else [stage]
    slots = [(st, b) for st in stages for b in range(max(s.buffers[st], 1))]
    if stage is None and len(slots) > MAX_SLOT_ROWS:
        return _per_stage(report, occ, len(slots), x_range)
    row_of = {slot: i for i, slot in enumerate(slots)}
    y = np.array(
        [row_of.get((int(a), int(b)), -1) for a, b in zip(occ.stage.tolist(), occ.buffer.tolist())]
    )
    keep = y >= 0
    y, mb = y[keep], occ.microbatch[keep]
    start, split, end = occ.start[keep], occ.split[keep], occ.end[keep]
    small = len(y) <= _TEXT_BARS
    fig = go.Figure()
    for name, a, b, colour in (
        ("activation held", start, split, ACTIVATION),
        ("gradient held", split, end, GRADIENT),
    ):
        part = b > a
        hover = (
            [
                f"micro-batch {m} · {name} · steps {x0:.2f} → {x1:.2f}"
                for m, x0, x1 in zip(mb[part].tolist(), a[part].tolist(), b[part].tolist())
            ]
            if part.sum() <= max_bars
            else None
        )
        text = [f"mb{m}" for m in mb[part].tolist()] if small else None
        fig.add_trace(
            hbars(
                name,
                y[part],
                a[part],
                b[part],
                colour,
                hover=hover,
                text=text,
                width=0.6,
                max_bars=max_bars,
                opacity=0.7,
            )
        )
    fig.add_trace(_overwrites(report, row_of, max_bars))
    alloc, need = report.buffers.allocated, report.buffers.needed
    if stage is None:
        short = [st for st in range(s.num_stages) if need[st] > alloc[st]]
        counts = f"allocated {list(alloc)} · needed {list(need)}"
        if short:
            counts += (
                f" · too few on stage{'s' if len(short) > 1 else ''} {', '.join(map(str, short))}"
            )
    else:
        counts = f"stage {stage}: {alloc[stage]} allocated, {need[stage]} needed"
    fig.update_layout(
        title=dict(text=f"Buffer lifetimes · {counts}"),
        barmode="overlay",
        height=row_height(len(slots), per_row=24.0),
        margin=dict(l=10, r=10, t=50, b=40),
        plot_bgcolor="white",
        xaxis=dict(
            title="step (each step split among its instructions, in order)",
            range=[-0.2, s.num_steps + 0.2],
            showgrid=True,
            gridcolor="#eee",
            dtick=1 if s.num_steps <= 60 else None,
        ),
        yaxis=dict(
            tickvals=list(range(len(slots))),
            ticktext=[f"stage {st} · buffer {b}" for st, b in slots],
            autorange="reversed",
            showgrid=False,
        ),
        legend=dict(font=dict(size=10)),
    )
    return fig


def _overwrites(report: Report, row_of: dict, max_bars: int) -> go.Bar | go.Scattergl:
    """A red span per hazard: from the write that replaced the slot to the read that needed it."""
    start, end = substep_positions(report.schedule)
    rows, x0, x1, hover = [], [], [], []
    for h in report.findings.hazards:
        row = row_of.get((h.at.stage, h.buffer))
        if row is None:
            continue
        writer = h.overwritten_by.index if h.overwritten_by is not None else h.at.index
        rows.append(row)
        x0.append(min(start[writer], start[h.at.index]))
        x1.append(max(end[writer], end[h.at.index]))
        hover.append(
            _wrap(f"HAZARD: {h.cause}")
            if len(hover) < max_bars
            else "HAZARD (see the findings list)"
        )
    return hbars(
        "overwritten while needed (hazard)",
        np.array(rows),
        np.array(x0),
        np.array(x1),
        HAZARD,
        hover=hover,
        width=0.9,
        opacity=0.55,
        showlegend=bool(rows),
        max_bars=max_bars,
    )


def _per_stage(
    report: Report, occ, slots: int, x_range: Optional[tuple[float, float]]
) -> go.Figure:
    """One row per stage: how many of its buffers hold a micro-batch, step by step; hazards in red."""
    s = report.schedule
    lo, hi = window(x_range, 0.0, float(s.num_steps))
    r = mean_count(
        occ.stage,
        occ.start,
        occ.end,
        s.num_stages,
        (lo, hi),
        bins=min(OVERVIEW_BINS, max(1, int(np.ceil(hi - lo)))),
    )
    alloc = np.maximum(np.asarray(report.buffers.allocated, dtype=float), 1.0)
    share = (r.z / alloc[:, None]).astype(np.float32)
    fig = go.Figure(
        go.Heatmap(
            name="buffers in use",
            z=share,
            x=r.centres,
            y=np.arange(s.num_stages),
            zmin=0,
            zmax=1.0,
            colorscale=[[0, "#ffffff"], [0.5, "#9ecae1"], [1.0, ACTIVATION]],
            customdata=r.z.astype(np.float32),
            colorbar=dict(title=dict(text="share of<br>allocated"), thickness=12, len=0.6),
            hovertemplate="stage %{y} · step ≈ %{x:.1f}<br>%{customdata:.1f} buffers in use (%{z:.0%} of allocated)<extra></extra>",
        )
    )
    start, end = substep_positions(s)
    hz = report.findings.hazards
    if hz:  # hazards per column as a red layer: one small heatmap whatever their number
        x = np.array([start[h.at.index] for h in hz])
        y = np.array([h.at.stage for h in hz], dtype=np.int64)
        keep = (x >= lo) & (x <= hi)
        col = np.clip(np.floor((x[keep] - r.x0) / r.width).astype(np.int64), 0, share.shape[1] - 1)
        count = np.zeros(share.shape, dtype=np.float32)
        np.add.at(count, (y[keep], col), 1.0)
        count[count == 0] = np.nan
        fig.add_trace(
            go.Heatmap(
                name=f"hazards ({len(hz)})",
                z=count,
                x=r.centres,
                y=np.arange(s.num_stages),
                colorscale=[[0, HAZARD], [1, HAZARD]],
                showscale=False,
                hoverongaps=False,
                showlegend=True,
                hovertemplate="stage %{y} · step ≈ %{x:.1f}: %{z} buffer(s) overwritten while needed<extra></extra>",
            )
        )
    alloc_l, need = report.buffers.allocated, report.buffers.needed
    short = [st for st in range(s.num_stages) if need[st] > alloc_l[st]]
    counts = f"{slots} buffers on {s.num_stages} stages, summarised per stage"
    if short:
        counts += f" · too few on {len(short)} stage{'s' if len(short) > 1 else ''} ({', '.join(map(str, short[:8]))}{', …' if len(short) > 8 else ''})"
    fig.update_layout(
        title=dict(
            text=f"Buffer lifetimes · {counts}<br><sup>pick a stage above to see its buffers one by one</sup>"
        ),
        height=row_height(s.num_stages, per_row=12.0),
        margin=dict(l=10, r=10, t=70, b=40),
        plot_bgcolor="white",
        xaxis=dict(title="step", range=[lo, hi], showgrid=False),
        yaxis=dict(
            tickvals=list(range(s.num_stages)),
            ticktext=[f"stage {st}" for st in range(s.num_stages)],
            autorange="reversed",
            showgrid=False,
        ),
        legend=dict(font=dict(size=10)),
    )
    return fig


__all__ = ["MAX_SLOT_ROWS", "lifetimes_figure"]
