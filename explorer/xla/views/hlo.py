"""Figures for an HLO diff: an aligned table of differences and a picture of the changed region.

Both are pure functions of the diff records and the two parsed modules; they return
``go.Figure`` objects that the notebook shows, the tests inspect with ``to_dict()``, and
:func:`report_html` puts into one offline page for ``explorer hlo-diff --html``.
"""

from __future__ import annotations

import html as _html
import re
from types import ModuleType
from typing import TYPE_CHECKING

from explorer.errors import require
from explorer.ui.html import page
from explorer.ui.layout import table_height
from explorer.xla.hlo.diff import short
from explorer.xla.hlo.model import Computation, Module
from explorer.xla.hlo.records import HloDiff

if TYPE_CHECKING:  # plotly is the lab extra's, imported when a figure is drawn (see _go)
    import plotly.graph_objects as go

_COLORS = {
    "added": "#2e7d32",
    "removed": "#c62828",
    "changed": "#ef6c00",
    "context": "#9e9e9e",
    "parameter": "#1565c0",
    "moved": "#6a1b9a",
    "arity": "#ef6c00",
}


_PATH = re.compile(r"(?:/[^\s/()`'\"]+)+/([^\s/()`'\"]+/[^\s/()`'\"]+)")


def _go() -> ModuleType:
    """plotly.graph_objects, imported when a figure is drawn (plotly is the ``lab`` extra's)."""
    return require("plotly.graph_objects", "lab", "Drawing HLO diff figures")


def short_paths(text: str) -> str:
    """Absolute paths cut to their last two parts: a table cell cannot wrap a path, so a full one
    ran out of its column (``/work/main/explorer/xla/runtime/steps.py:100`` -> ``xla/steps.py:100``)."""
    return _PATH.sub(lambda m: m.group(1), text)


def _context(comp: Computation, name: str, limit: int = 3) -> str:
    inst = comp.by_name.get(name)
    if inst is None:
        return ""
    ops = ", ".join("%" + o for o in inst.operands[:limit])
    more = ", ..." if len(inst.operands) > limit else ""
    return f"reads {ops}{more}" if ops else ""


def diff_rows(
    d: HloDiff, a: Module, b: Module, limit: int = 400
) -> list[tuple[str, str, str, str, str]]:
    """Rows (kind, in A, in B, origin, matched context) in the order the summary tells them."""
    rows: list[tuple[str, str, str, str, str]] = []
    for p in d.parameter_permutation:
        rows.append(
            (
                "parameter",
                f"parameter({p.index_a}) %{p.name_a}",
                f"parameter({p.index_b}) %{p.name_b}",
                p.op_name,
                p.shape,
            )
        )
    for t in d.tuple_arity:
        rows.append(
            (
                "arity",
                f"%{t.name_a}: {t.arity_a} elements",
                f"%{t.name_b}: {t.arity_b} elements",
                t.opcode,
                "",
            )
        )
    for g in d.removed:
        rows.append(
            (
                "removed",
                f"{g.count}x " + ", ".join(f"{n} {o}" for o, n in g.opcodes),
                "",
                g.label,
                "lines " + ", ".join(map(str, g.lines[:6])) + (" ..." if len(g.lines) > 6 else ""),
            )
        )
    for g in d.added:
        rows.append(
            (
                "added",
                "",
                f"{g.count}x " + ", ".join(f"{n} {o}" for o, n in g.opcodes),
                g.label,
                "lines " + ", ".join(map(str, g.lines[:6])) + (" ..." if len(g.lines) > 6 else ""),
            )
        )
    for c in d.changed:
        rows.append(
            (
                "changed",
                f"%{c.name_a} = {c.before}",
                f"%{c.name_b} = {c.after}",
                f"{c.op_type} ({'/'.join(c.kinds)})",
                _context(b.entry, c.name_b),
            )
        )
    for m in d.moved_constants:
        rows.append(
            (
                "moved",
                f"%{m.name_a} (line {m.line_a})",
                f"%{m.name_b} (line {m.line_b})",
                m.op_type,
                f"{m.shape} constant({m.literal})" + ("; users changed" if m.users_changed else ""),
            )
        )
    if len(rows) > limit:
        rest = len(rows) - limit
        rows = rows[:limit] + [("...", f"{rest} more rows", "", "", "")]
    return rows


def diff_table(d: HloDiff, a: Module, b: Module, limit: int = 400) -> go.Figure:
    """The aligned table: one row per difference, A on the left, B on the right.

    Empty cells read "-" and a diff with no differences gets one row that says so: a column
    without any text looks like a table that failed to draw.
    """
    go = _go()
    rows = diff_rows(d, a, b, limit)
    shown = [tuple(_html.escape(short_paths(c)) if c else "-" for c in r) for r in rows] or [
        ("none", "-", "-", "the two modules match instruction for instruction", "-")
    ]
    cols = [list(c) for c in zip(*shown)]
    fill = [[_COLORS.get(r[0], "#ffffff") + "22" for r in rows] or ["#ffffff"]] * 5
    header = ["kind", f"in {d.module_a}", f"in {d.module_b}", "origin", "context"]
    weights = [60, 260, 260, 160, 160]
    fig = go.Figure(
        go.Table(
            columnwidth=weights,
            header=dict(values=[f"<b>{_html.escape(h)}</b>" for h in header], align="left"),
            cells=dict(values=cols, align="left", fill_color=fill, height=24),
        )
    )
    fig.update_layout(
        title=f"{len(rows)} differences; {d.matched_count} instructions matched",
        height=table_height(cols, weights),
        autosize=True,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def _region(d: HloDiff, b: Module, max_nodes: int) -> dict[str, str]:
    comp = b.entry
    kinds = {n: "added" for g in d.added for n in g.names}
    kinds.update({c.name_b: "changed" for c in d.changed})
    kinds.update({p.name_b: "parameter" for p in d.parameter_permutation})
    core = list(kinds)[:max_nodes]
    region = {n: kinds[n] for n in core}
    users: dict[str, list[str]] = {}
    for inst in comp.instructions:
        for o in inst.operands:
            users.setdefault(o, []).append(inst.name)
    for n in core:
        for nb in list(comp.by_name[n].operands[:2]) + users.get(n, [])[:2]:
            if len(region) >= 2 * max_nodes:
                break
            region.setdefault(nb, "context")
    return region


def changed_region(d: HloDiff, a: Module, b: Module, max_nodes: int = 40) -> go.Figure:
    """A compact graph of B's changed region: added, changed and permuted nodes with neighbours.

    Nodes are laid out by depth inside the region (operands left of users); removed
    instructions, which exist only in A, are listed in a column of their own on the far left.
    """
    go = _go()
    region = _region(d, b, max_nodes)
    comp = b.entry
    depth: dict[str, int] = {}
    for inst in comp.order:
        if inst.name in region:
            depth[inst.name] = 1 + max((depth[o] for o in inst.operands if o in depth), default=0)
    removed = [n for g in d.removed for n in g.names][:max_nodes]
    pos: dict[str, tuple[float, float]] = {}
    per_layer: dict[int, int] = {}
    for name in depth:
        x = depth[name]
        pos[name] = (x, per_layer.get(x, 0))
        per_layer[x] = per_layer.get(x, 0) + 1
    edge_x: list = []
    edge_y: list = []
    for name in depth:
        for o in comp.by_name[name].operands:
            if o in pos:
                edge_x += [pos[o][0], pos[name][0], None]
                edge_y += [pos[o][1], pos[name][1], None]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=edge_x,
            y=edge_y,
            mode="lines",
            line=dict(color="#bbbbbb", width=1),
            hoverinfo="skip",
            name="operand edge",
        )
    )
    for kind in ("context", "parameter", "changed", "added"):
        names = [n for n in depth if region[n] == kind]
        if names:
            fig.add_trace(
                go.Scatter(
                    x=[pos[n][0] for n in names],
                    y=[pos[n][1] for n in names],
                    mode="markers+text",
                    text=[comp.by_name[n].opcode for n in names],
                    textposition="top center",
                    hovertext=[f"%{n} = {short(comp.by_name[n])}" for n in names],
                    hoverinfo="text",
                    marker=dict(size=12, color=_COLORS[kind]),
                    name=f"{kind} (in {d.module_b})",
                )
            )
    if removed:
        acomp = a.entry
        fig.add_trace(
            go.Scatter(
                x=[-1] * len(removed),
                y=list(range(len(removed))),
                mode="markers+text",
                text=[acomp.by_name[n].opcode for n in removed],
                textposition="middle left",
                hovertext=[f"%{n} = {short(acomp.by_name[n])}" for n in removed],
                hoverinfo="text",
                marker=dict(size=12, color=_COLORS["removed"], symbol="x"),
                name=f"removed (only in {d.module_a})",
            )
        )
    fig.update_layout(
        title="Changed region (operands left of users)",
        showlegend=True,
        xaxis=dict(title="depth in region", zeroline=False),
        yaxis=dict(visible=False),
        height=520,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def report_html(d: HloDiff, a: Module, b: Module) -> str:
    """One self-contained page: the summary, the table and the changed-region picture."""
    counts = (
        f"<p>{d.module_a}: {d.instructions_a} entry instructions, {d.parameters_a} parameters; "
        f"{d.module_b}: {d.instructions_b} entry instructions, {d.parameters_b} parameters.</p>"
    )
    return page(
        f"HLO diff: {d.module_a} vs {d.module_b}",
        [
            f"<p class='finding'>{_html.escape(d.summary)}</p>",
            counts,
            diff_table(d, a, b),
            changed_region(d, a, b),
        ],
    )


__all__ = [
    "short_paths",
    "diff_rows",
    "diff_table",
    "changed_region",
    "report_html",
]
