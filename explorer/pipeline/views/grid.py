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

from typing import Mapping, Optional, Sequence

import numpy as np
import plotly.graph_objects as go

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.pipeline.views.axes import row_height, stage_labels
from explorer.pipeline.views.bars import rectangles
from explorer.pipeline.views.marks import findings_by_cell
from explorer.pipeline.views.palette import (
    HAZARD,
    KIND_COLOURS,
    MOVED,
    SELECTED,
    discrete_colorscale,
    kind_label,
)
from explorer.pipeline.views.raster import OVERVIEW_BINS, dominant, window
from explorer.pipeline.views.words import described, short_texts

#: Cell text only where a cell is wide enough to read it: at most this many steps in view.
TEXT_COLUMNS = 32
MAX_LINES = 5
#: Hover in words (DeepSpeed names, the finding) up to this many cells in view; codes beyond.
WORDS_CELLS = 2000
#: Exact cells up to this many in view; beyond, the overview bins steps (:mod:`explorer.pipeline.views.raster`).
DETAIL_CELLS = 6000
DETAIL_COLUMNS = 480
#: Above this many outlines or arrows the polylines switch to WebGL.
MAX_SVG_LINES = 2000
#: Kept for callers that set it: an upper bound on cells with text, on top of TEXT_COLUMNS.
MAX_TEXT_CELLS = 2500
_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
_P2P = np.array(
    [int(Kind.SEND_ACTIVATION), int(Kind.RECV_ACTIVATION), int(Kind.SEND_GRAD), int(Kind.RECV_GRAD)]
)
_INSET = 0.06


def grid_figure(
    report: Report,
    *,
    arrows: bool = False,
    selected: Optional[tuple[int, int]] = None,
    max_text_cells: int = MAX_TEXT_CELLS,
    x_range: Optional[tuple[float, float]] = None,
    moved: Sequence[tuple[int, int]] = (),
    marks: Optional[Mapping[tuple[int, int], list[str]]] = None,
) -> go.Figure:
    """The grid of ``report.schedule`` with its findings outlined; ``selected`` is a ``(stage, step)``;
    ``moved`` are the cells a fix's rules changed (outlined in purple); ``marks`` are findings
    the schedule alone cannot show (a run's P2P contract violations, :func:`contract_marks`),
    keyed and worded like the report's own and outlined and said the same way.

    ``x_range`` is the range of steps on screen (the widget passes what the user zoomed to):
    cells, text and hover are sent for that range only, and above ``DETAIL_CELLS`` cells the
    range is drawn as an overview whose columns each summarise several steps.
    """
    s = report.schedule
    stages, steps = s.num_stages, s.num_steps
    lo_x, hi_x = window(x_range, -0.5, steps - 0.5)
    lo, hi = max(0, int(np.ceil(lo_x - 0.5))), min(steps - 1, int(np.floor(hi_x + 0.5)))
    columns = max(hi - lo + 1, 1)
    cells = findings_by_cell(report)
    for cell, words in (marks or {}).items():
        cells[cell] = cells.get(cell, []) + list(words)
    overview = columns > DETAIL_COLUMNS or stages * columns > DETAIL_CELLS
    exact = True
    if overview:
        heat, outlines, note = _overview(report, cells, (lo_x, hi_x))
        lines = 1
        exact = columns <= OVERVIEW_BINS
    else:
        with_text = columns <= TEXT_COLUMNS and stages * columns <= max_text_cells and stages <= 48
        heat, lines = _detail(
            report, cells, lo, hi, with_text=with_text, words=stages * columns <= WORDS_CELLS
        )
        outlines = _outline("findings", [c for c in cells if lo <= c[1] <= hi], HAZARD, 3.0)
        note = "" if with_text else " · zoom in to read the cells"
    traces: list = [
        heat,
        outlines,
        _outline("selected", [selected] if selected else [], SELECTED, 4.0),
        _outline("moved by the fix", [c for c in moved if lo <= c[1] <= hi], MOVED, 2.5),
    ]
    show_arrows = arrows and not overview
    traces.append(
        _arrows(report, lo, hi)
        if show_arrows
        else go.Scatter(name="send -> receive", x=[], y=[], showlegend=False)
    )
    if arrows and overview:
        note += " · arrows appear once zoomed in"
    present = set(np.unique(s.kind).tolist())
    for kind in (k for k in Kind if int(k) in present):  # legend entries for the kinds present
        traces.append(
            go.Scatter(
                name=kind_label(kind),
                x=[None],
                y=[None],
                mode="markers",
                legendgroup="kinds",
                marker=dict(symbol="square", size=11, color=KIND_COLOURS[kind]),
                hoverinfo="skip",
            )
        )
    fig = go.Figure(traces)
    n_findings = len(report.findings.all())
    verdict = (
        f"{n_findings} finding{'s' if n_findings != 1 else ''}" if n_findings else "no findings"
    )
    fig.update_layout(
        title=dict(
            text=f"Instruction grid · {s.name} · {stages} stages × {s.num_microbatches} micro-batches · {verdict}"
            f"<br><sup>{('overview: one column per step' if exact else 'overview: each column sums up several steps (its most common kind)') if overview else 'steps ' + str(lo) + '–' + str(hi)}{note}</sup>"
        ),
        height=max(
            row_height(stages, per_row=max(22.0, 13.0 * lines + 10.0), extra=120.0),
            legend_height(fig, top=70, bottom=40),
        ),
        margin=dict(l=10, r=10, t=70, b=40),
        plot_bgcolor="white",
        xaxis=dict(title="step", showgrid=False, zeroline=False, range=[lo_x, hi_x]),
        yaxis=dict(
            tickvals=list(range(stages)),
            ticktext=stage_labels(s),
            autorange="reversed",
            showgrid=False,
            zeroline=False,
        ),
        legend=dict(font=dict(size=10), tracegroupgap=2),
    )
    return fig


#: Pixels per legend entry at the grid's legend font (size 10, ``tracegroupgap`` 2), with room.
LEGEND_ROW = 21.0


def legend_height(fig: go.Figure, top: float, bottom: float) -> int:
    """Figure height at which every legend entry fits beside the plot: below it, plotly clips
    the legend and gives it a scroll bar (3 stages x 3 micro-batches hid OptimizerStep)."""
    entries = sum(
        1
        for t in fig.select_traces()
        if t.type == "scatter" and t.showlegend is not False and t.name
    )
    return int(top + bottom + LEGEND_ROW * entries + 30)  # + the legend's own padding


def _main_rows(report: Report, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each cell among ``rows``, its cell index and the row whose kind colours it."""
    s = report.schedule
    kind = s.kind[rows].astype(np.int64)
    cell = s.stage[rows].astype(np.int64) * s.num_steps + s.step[rows]
    prio = np.where(np.isin(kind, _COMPUTE), 2, np.where(np.isin(kind, _P2P), 1, 0))
    order = np.lexsort((-np.arange(len(rows)), prio, cell))
    last = order[np.r_[cell[order][1:] != cell[order][:-1], True]] if len(rows) else order
    return cell[last], rows[last]


def _overview(report: Report, marks: dict, x_range: tuple[float, float]):
    """The heatmap of binned steps, and findings outlined per bin."""
    s = report.schedule
    cell, main = _main_rows(report, np.arange(len(s)))
    stage, step = np.divmod(cell, s.num_steps)
    bins = min(OVERVIEW_BINS, max(1, int(np.ceil(x_range[1] - x_range[0]))))
    r = dominant(
        stage,
        step - 0.5,
        step + 0.5,
        s.kind[main],
        s.num_stages,
        x_range,
        bins=bins,
        num_categories=len(Kind),
    )
    z = r.z.astype(np.float32)
    codes = np.array(
        [k.code for k in Kind] + [""]
    )  # fixed-width strings: copied in one piece, not item by item
    hover = codes[np.where(np.isnan(z), len(Kind), z).astype(np.int64)]
    heat = go.Heatmap(
        name="instructions",
        z=z,
        x=r.centres,
        y=np.arange(s.num_stages),
        zmin=-0.5,
        zmax=len(Kind) - 0.5,
        colorscale=discrete_colorscale(),
        showscale=False,
        hoverongaps=False,
        customdata=hover,
        hovertemplate="stage %{y} · steps around %{x:.0f}<br>mostly %{customdata}<extra></extra>",
    )
    # Findings per column as a red layer: one small heatmap, not an outline per cell.
    marked = np.array(
        [(st, t) for st, t in marks if x_range[0] <= t <= x_range[1]], dtype=float
    ).reshape(-1, 2)
    count = np.zeros(z.shape, dtype=np.float32)
    col = np.clip(np.floor((marked[:, 1] - r.x0) / r.width).astype(np.int64), 0, z.shape[1] - 1)
    np.add.at(count, (marked[:, 0].astype(np.int64), col), 1.0)
    binned = int((count > 0).sum())
    count[count == 0] = np.nan
    outline = go.Heatmap(
        name="findings",
        z=count,
        x=r.centres,
        y=np.arange(s.num_stages),
        showscale=False,
        colorscale=[[0, HAZARD], [1, HAZARD]],
        hoverongaps=False,
        showlegend=bool(binned),
        hovertemplate="stage %{y} · steps around %{x:.0f}<br>%{z} finding(s): zoom in<extra></extra>",
    )
    return heat, outline, f" · {len(marks)} findings in {binned} red columns; zoom in for each cell"


def _detail(report: Report, marks: dict, lo: int, hi: int, *, with_text: bool, words: bool):
    """Exact cells for steps ``lo..hi``: colour, text where readable, hover."""
    s = report.schedule
    stages, steps = s.num_stages, s.num_steps
    rows = np.nonzero((s.step >= lo) & (s.step <= hi))[0]
    width = hi - lo + 1
    cell, main = _main_rows(report, rows)
    z = np.full(stages * width, np.nan)
    st_main, t_main = np.divmod(cell, steps)
    z[st_main * width + (t_main - lo)] = s.kind[main]
    z = z.reshape(stages, width).astype(
        np.float32
    )  # a typed array on the wire; NaN is an empty cell

    short = short_texts(s, rows)
    said = described(s, rows) if words else []
    rel = s.stage[rows].astype(np.int64) * width + (s.step[rows] - lo)
    by_cell = np.argsort(rel, kind="stable")
    bounds = (
        np.r_[0, np.nonzero(np.diff(rel[by_cell]))[0] + 1, len(rows)]
        if len(rows)
        else np.zeros(1, dtype=np.int64)
    )
    text = np.full((stages, width), "", dtype=object) if with_text else None
    hover = np.full((stages, width), "", dtype=object)
    labels = stage_labels(s)
    lines = 1
    for a, b in zip(bounds[:-1], bounds[1:]):
        mine = by_cell[a:b]
        st, t = divmod(int(rel[mine[0]]), width)
        codes = [short[i] for i in mine]
        if (
            text is not None
        ):  # with_text: one code per line (two side by side do not fit a cell), at most MAX_LINES
            per_line = -(-len(codes) // MAX_LINES)
            text[st, t] = "<br>".join(
                " ".join(codes[i : i + per_line]) for i in range(0, len(codes), per_line)
            )
            lines = max(lines, min(MAX_LINES, len(codes)))
        if words:
            hover[st, t] = f"<b>{labels[st]} · step {t + lo}</b><br>" + "<br>".join(
                f"{c}: {said[i]}" for c, i in zip(codes, mine.tolist())
            )
        else:  # many cells: the template adds the position, keep the payload small
            hover[st, t] = " ".join(codes)
    for (st, t), found in marks.items():
        if 0 <= st < stages and lo <= t <= hi:
            if not words:  # many cells: name the finding, the findings list has the words
                found = [f"{found[0].split(':')[0]} ({len(found)}; see the findings list)"]
            hover[st, t - lo] += "".join(
                f"<br><span style='color:{HAZARD}'>{_wrap(w)}</span>" for w in found
            )
    heat = go.Heatmap(
        name="instructions",
        z=z,
        x=np.arange(lo, hi + 1),
        y=np.arange(stages),
        zmin=-0.5,
        zmax=len(Kind) - 0.5,
        colorscale=discrete_colorscale(),
        showscale=False,
        text=text,
        texttemplate="%{text}" if text is not None else None,
        textfont=dict(size=9),
        hovertext=hover,
        hoverongaps=False,
        xgap=1 if with_text else 0,
        ygap=1 if with_text else 0,
        hovertemplate=("%{hovertext}" if words else "stage %{y} · step %{x}<br>%{hovertext}")
        + "<extra></extra>",
    )
    return heat, lines


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
    return cls(
        name=name,
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color=colour, width=width),
        hoverinfo="skip",
        showlegend=bool(len(cells)),
        connectgaps=False,
    )


def _arrows(report: Report, lo: int = 0, hi: Optional[int] = None) -> go.Scatter | go.Scattergl:
    """One arrow per matched send -> receive pair in steps ``lo..hi``, from the sender's cell to the receiver's."""
    s = report.schedule
    hi = s.num_steps - 1 if hi is None else hi
    partner = report.matching.partner
    sends = np.nonzero(
        np.isin(s.kind, [int(Kind.SEND_ACTIVATION), int(Kind.SEND_GRAD)])
        & (partner >= 0)
        & (s.step >= lo)
        & (s.step <= hi)
    )[0]
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
    return cls(
        name="send -> receive",
        x=xs,
        y=ys,
        mode="lines+markers",
        line=dict(color="#555555", width=1),
        marker=marker,
        hoverinfo="skip",
        showlegend=bool(len(sends)),
        connectgaps=False,
    )


__all__ = [
    "TEXT_COLUMNS",
    "MAX_LINES",
    "WORDS_CELLS",
    "DETAIL_CELLS",
    "DETAIL_COLUMNS",
    "MAX_SVG_LINES",
    "MAX_TEXT_CELLS",
    "LEGEND_ROW",
    "grid_figure",
    "legend_height",
]
