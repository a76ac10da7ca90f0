"""The instruction grid: stages down, steps across, every cell a step of one stage's stream.

This is the picture in the seed thread, drawn from the schedule's columns. One ``go.Heatmap``
holds every cell (colour = the cell's main kind: its compute instruction if it has one,
else its first exchange), so 64 stages x 1,150 steps is one trace, not 70,000 shapes. Cell
text is the compact form without the stage (``RA2b0``) while cells are few enough to read;
hover always gives the DeepSpeed names and, for a cell with a finding, the finding in words.
Findings are outlined in red by one polyline trace; the selected finding in amber; send ->
receive pairs are optional arrows.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from explorer.analysis.check import Report
from explorer.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.views.axes import row_height, stage_labels
from explorer.views.bars import rectangles
from explorer.views.marks import findings_by_cell
from explorer.views.palette import HAZARD, KIND_COLOURS, SELECTED, discrete_colorscale, kind_label
from explorer.views.words import described, short_texts

#: Above this many cells the text inside cells is dropped (unreadable anyway); hover stays.
MAX_TEXT_CELLS = 2500
#: Above this many outlines or arrows the polylines switch to WebGL.
MAX_SVG_LINES = 2000
_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
_P2P = np.array([int(Kind.SEND_ACTIVATION), int(Kind.RECV_ACTIVATION), int(Kind.SEND_GRAD), int(Kind.RECV_GRAD)])
_INSET = 0.06


def grid_figure(report: Report, *, arrows: bool = False, selected: Optional[tuple[int, int]] = None,
                max_text_cells: int = MAX_TEXT_CELLS) -> go.Figure:
    """The grid of ``report.schedule`` with its findings outlined; ``selected`` is a ``(stage, step)``."""
    s = report.schedule
    stages, steps = s.num_stages, s.num_steps
    cells = findings_by_cell(report)
    with_text = stages * steps <= max_text_cells
    z, text, hover = _cells(report, cells, with_text=with_text)
    per_cell = np.bincount(s.stage.astype(np.int64) * steps + s.step, minlength=stages * steps) if len(s) else np.zeros(1)
    lines = int(min(3, per_cell.max())) if with_text else 1
    heat = go.Heatmap(
        name="instructions", z=z, x=np.arange(steps), y=np.arange(stages),
        zmin=-0.5, zmax=len(Kind) - 0.5, colorscale=discrete_colorscale(), showscale=False,
        text=text, texttemplate="%{text}" if text is not None else None, textfont=dict(size=9),
        hovertext=hover, hoverongaps=False, xgap=1 if with_text else 0, ygap=1 if with_text else 0,
        hovertemplate=("%{hovertext}" if with_text else "stage %{y} · step %{x}<br>%{hovertext}") + "<extra></extra>",
    )
    traces: list = [heat, _outline("findings", list(cells), HAZARD, 3.0), _outline("selected", [selected] if selected else [], SELECTED, 4.0)]
    traces.append(_arrows(report) if arrows else go.Scatter(name="send -> receive", x=[], y=[], showlegend=False))
    present = set(np.unique(s.kind).tolist())
    for kind in (k for k in Kind if int(k) in present):  # legend entries for the kinds present
        traces.append(go.Scatter(name=kind_label(kind), x=[None], y=[None], mode="markers", legendgroup="kinds",
                                 marker=dict(symbol="square", size=11, color=KIND_COLOURS[kind]),
                                 hoverinfo="skip"))
    fig = go.Figure(traces)
    n_findings = len(report.findings.all())
    verdict = f"{n_findings} finding{'s' if n_findings != 1 else ''}" if n_findings else "no findings"
    fig.update_layout(
        title=dict(text=f"Instruction grid · {s.name} · {stages} stages × {s.num_microbatches} micro-batches · {verdict}"),
        height=row_height(stages, per_row=max(22.0, 13.0 * lines + 10.0), extra=110.0),
        margin=dict(l=10, r=10, t=50, b=40), plot_bgcolor="white",
        xaxis=dict(title="step", showgrid=False, zeroline=False, range=[-0.5, steps - 0.5]),
        yaxis=dict(tickvals=list(range(stages)), ticktext=stage_labels(s), autorange="reversed",
                   showgrid=False, zeroline=False),
        legend=dict(font=dict(size=10), tracegroupgap=2),
    )
    return fig


def _cells(report: Report, marks: dict, with_text: bool):
    """Per-cell colour value, text and hover, built from the columns in a few sorts."""
    s = report.schedule
    stages, steps, n = s.num_stages, s.num_steps, len(s)
    kind = s.kind.astype(np.int64)
    cell = s.stage.astype(np.int64) * steps + s.step
    prio = np.where(np.isin(kind, _COMPUTE), 2, np.where(np.isin(kind, _P2P), 1, 0))
    order = np.lexsort((-np.arange(n), prio, cell))
    last = order[np.r_[cell[order][1:] != cell[order][:-1], True]] if n else order
    z = np.full(stages * steps, np.nan)
    z[cell[last]] = kind[last]
    # Empty cells as None, not NaN: FigureWidget sends 2-D arrays as JSON, which has no NaN.
    z = np.where(np.isnan(z), None, z).reshape(stages, steps).tolist()

    short = short_texts(s, np.arange(n))
    words = described(s, np.arange(n)) if with_text else []
    by_cell = np.argsort(cell, kind="stable")
    bounds = np.r_[0, np.nonzero(np.diff(cell[by_cell]))[0] + 1, n] if n else np.zeros(1, dtype=np.int64)
    text = np.full((stages, steps), "", dtype=object) if with_text else None
    hover = np.full((stages, steps), "", dtype=object)
    labels = stage_labels(s)
    for a, b in zip(bounds[:-1], bounds[1:]):
        rows = by_cell[a:b]
        st, t = divmod(int(cell[rows[0]]), steps)
        codes = [short[r] for r in rows]
        if with_text:
            per_line = -(-len(codes) // 3)
            text[st, t] = "<br>".join(" ".join(codes[i:i + per_line]) for i in range(0, len(codes), per_line))
        if with_text:
            hover[st, t] = f"<b>{labels[st]} · step {t}</b><br>" + "<br>".join(
                f"{c}: {words[r]}" for c, r in zip(codes, rows.tolist()))
        else:  # large grids: the template adds the position, keep the payload small
            hover[st, t] = " ".join(codes)
    for (st, t), words in marks.items():
        if 0 <= st < stages and 0 <= t < steps:
            if not with_text:  # large grids: name the finding, the findings list has the words
                words = [f"{words[0].split(':')[0]} ({len(words)}; see the findings list)"]
            hover[st, t] += "".join(f"<br><span style='color:{HAZARD}'>{_wrap(w)}</span>" for w in words)
    return z, text, hover


def _wrap(words: str, width: int = 90) -> str:
    """Break a long finding into hover lines (plotly does not wrap hover text)."""
    out, line = [], ""
    for word in words.split():
        if line and len(line) + len(word) + 1 > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    out.append(line)
    return "<br>".join(out)


def _outline(name: str, cells: list, colour: str, width: float) -> go.Scatter | go.Scattergl:
    """Red (or amber) rectangles around ``(stage, step)`` cells, as one trace."""
    st = np.array([c[0] for c in cells], dtype=float)
    t = np.array([c[1] for c in cells], dtype=float)
    xs, ys = rectangles(t - 0.5 + _INSET, t + 0.5 - _INSET, st - 0.5 + _INSET, st + 0.5 - _INSET)
    cls = go.Scattergl if len(cells) > MAX_SVG_LINES else go.Scatter
    return cls(name=name, x=xs, y=ys, mode="lines", line=dict(color=colour, width=width),
               hoverinfo="skip", showlegend=bool(len(cells)), connectgaps=False)


def _arrows(report: Report) -> go.Scatter | go.Scattergl:
    """One arrow per matched send -> receive pair, from the sender's cell to the receiver's."""
    s = report.schedule
    partner = report.matching.partner
    sends = np.nonzero(np.isin(s.kind, [int(Kind.SEND_ACTIVATION), int(Kind.SEND_GRAD)]) & (partner >= 0))[0]
    recvs = partner[sends]
    x0, x1 = s.step[sends].astype(float), s.step[recvs].astype(float)
    y0, y1 = s.stage[sends].astype(float), s.stage[recvs].astype(float)
    d = np.sign(y1 - y0)
    y0, y1 = y0 + 0.25 * d, y1 - 0.25 * d
    gap = np.full(len(sends), np.nan)
    xs = np.column_stack([x0, x1, gap]).reshape(-1)
    ys = np.column_stack([y0, y1, gap]).reshape(-1)
    size = np.tile([0.0, 9.0, 0.0], len(sends))
    cls = go.Scattergl if len(sends) > MAX_SVG_LINES else go.Scatter
    marker = dict(size=size, color="#555555")
    if cls is go.Scatter:
        marker.update(symbol="arrow", angleref="previous")
    return cls(name="send -> receive", x=xs, y=ys, mode="lines+markers", line=dict(color="#555555", width=1),
               marker=marker, hoverinfo="skip", showlegend=bool(len(sends)), connectgaps=False)
