"""Figures for an XLA run: the step timeline, the distinct graphs, and a diff between two graphs.

Pure functions of :class:`~explorer.xla.traces.records.XlaRun` returning ``go.Figure``; the
widget copies them into ``FigureWidget``s, the tests read ``fig.to_dict()``. Time is on a log
axis because a compile costs seconds and a cached step milliseconds; a new graph is marked
above its step, red when it is a recompile (a near-duplicate of an earlier graph), grey when it
is a new computation.
"""

from __future__ import annotations

import html
from types import ModuleType
from typing import TYPE_CHECKING, Any, Optional, cast

from explorer.errors import require
from explorer.ui.layout import BOTTOM_LEGEND, BOTTOM_MARGIN, table_height
from explorer.xla.hlo import diff_modules
from explorer.xla.views.hlo import diff_table, short_paths

if TYPE_CHECKING:  # plotly is the lab extra's, imported when a figure is drawn (see _go)
    import plotly.graph_objects as go

    from explorer.xla.traces.records import Step, XlaRun

COMPILE, EXECUTE, RECOMPILE, NEW = "#ff7f0e", "#1f77b4", "#d62728", "#7f7f7f"
GROUP_FILLS = (
    "#e3f2fd",
    "#fff3e0",
    "#e8f5e9",
    "#f3e5f5",
    "#fffde7",
    "#e0f7fa",
    "#fbe9e7",
    "#eceff1",
)


def _go() -> ModuleType:
    """plotly.graph_objects, imported when a figure is drawn (plotly is the ``lab`` extra's)."""
    return require("plotly.graph_objects", "lab", "XLA run figures")


def step_timeline(run: XlaRun) -> go.Figure:
    """Compile and execute time per step (log axis), with a marker over each step that made a new graph.

    A run read back from artifacts has no per-step times (torch_xla writes none): then every step
    is one marker on a single row, new graph or from the cache, instead of an empty log axis with
    the new-graph markers floating at a made-up height."""
    go = _go()
    steps = run.steps
    timed = any(s.compile_ms or s.execute_ms or s.wall_ms for s in steps)
    fig = _timed_steps(go, run) if timed else _untimed_steps(go, run)
    failed = run.failure.step if run.failure is not None else None
    title = f"{run.label}: {graph_counts(run)}"
    if run.failure is not None:
        title += f" — failed ({run.failure.kind})" + (
            f" at step {failed}" if failed is not None else ""
        )
    fig.update_layout(
        title=title,
        autosize=True,
        xaxis=dict(title="step", dtick=1 if len(steps) <= 40 else None),
        legend=BOTTOM_LEGEND,
    )
    return fig


def _new_graph_marker(go: ModuleType, run: XlaRun, y: list) -> go.Scatter:
    """The triangles over the steps that compiled a graph (the widget's click target: the last trace)."""
    new = [s for s in run.steps if s.new_graphs]
    kinds = [_is_recompile(run, s) for s in new]
    return go.Scatter(
        x=[s.step for s in new],
        y=y,
        mode="markers+text",
        name="new graph",
        text=[s.new_graphs[-1][:8] for s in new],
        textposition="top center",
        cliponaxis=False,
        customdata=[s.new_graphs[-1] for s in new],
        marker=dict(
            symbol="triangle-down", size=13, color=[RECOMPILE if k else NEW for k in kinds]
        ),
        hovertext=[html.escape(s.cause) for s in new],
        hoverinfo="text",
    )


def _timed_steps(go: ModuleType, run: XlaRun) -> go.Figure:
    steps = run.steps
    x = [s.step for s in steps]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=x,
            y=[s.compile_ms or None for s in steps],
            name="compile",
            marker_color=COMPILE,
            hovertemplate="step %{x}<br>compile %{y:.1f} ms<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=[s.execute_ms or None for s in steps],
            name="execute",
            marker_color=EXECUTE,
            hovertemplate="step %{x}<br>execute %{y:.3f} ms<extra></extra>",
        )
    )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=[s.wall_ms for s in steps],
            name="step wall time",
            mode="lines+markers",
            line=dict(color="#444", width=1, dash="dot"),
            hovertemplate="step %{x}<br>wall %{y:.1f} ms<extra></extra>",
        )
    )
    new = [s for s in steps if s.new_graphs]
    fig.add_trace(
        _new_graph_marker(
            go, run, [max(s.wall_ms or 0.0, s.compile_ms or 0.0, 1e-3) * 1.8 for s in new]
        )
    )
    fig.update_layout(
        barmode="group",
        height=450,
        margin=dict(l=60, r=20, t=50, b=BOTTOM_MARGIN),
        yaxis=dict(title="ms (log)", type="log"),
    )
    return fig


def _untimed_steps(go: ModuleType, run: XlaRun) -> go.Figure:
    cached = [s for s in run.steps if not s.new_graphs]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[s.step for s in cached],
            y=[0] * len(cached),
            mode="markers",
            name="ran from the compile cache",
            marker=dict(symbol="circle-open", size=11, color=NEW, line=dict(width=2)),
            hovertext=[html.escape(s.cause) for s in cached],
            hoverinfo="text",
        )
    )
    fig.add_trace(_new_graph_marker(go, run, [0] * sum(1 for s in run.steps if s.new_graphs)))
    fig.update_layout(
        height=300,
        margin=dict(l=60, r=20, t=70, b=BOTTOM_MARGIN),
        yaxis=dict(visible=False, range=[-1, 1.5], fixedrange=True),
        annotations=[
            dict(
                text="no per-step times in these artifacts: each step is marked new graph or cache hit",
                xref="paper",
                yref="paper",
                x=0,
                y=1.08,
                xanchor="left",
                showarrow=False,
                font=dict(size=12, color="#555"),
            )
        ],
    )
    return fig


def graph_counts(run: XlaRun) -> str:
    """What the title counts, said precisely: graphs the steps compiled (the number a user expects),
    how many of those are near-duplicates of an earlier graph (red markers), and setup graphs apart.

    "4 distinct graph(s)" counted the small graphs FSDP compiles while sharding the parameters,
    so it disagreed with "2 graphs, as expected" for the same run.
    """
    by_steps = [g for g in run.graphs if g.step >= 0]
    setup = len(run.graphs) - len(by_steps)
    at = sorted({g.step for g in by_steps})
    if not at:
        text = "the steps compiled no graph"
    else:
        steps = f"step{'s' if len(at) > 1 else ''} {', '.join(map(str, at))}"
        near = sum(1 for g in by_steps if g.recompile)
        text = (
            f"{steps} compiled {len(by_steps)} graph{'s' if len(by_steps) > 1 else ''}, "
            f"{near} {'a near-duplicate' if near == 1 else 'near-duplicates'} of an earlier graph (red)"
        )
    if setup:
        text += f"; {setup} more at setup"
    return text


def _is_recompile(run: XlaRun, step: Step) -> bool:
    g = run.graph(step.new_graphs[-1])
    return bool(g and g.recompile)


def graphs_table(run: XlaRun) -> go.Figure:
    """Every distinct graph, grouped as near-duplicates (one fill colour per group).

    Every cell has text ("-" where a graph has nothing to say), so no column of the table the
    page draws is blank, and hashes are cut to the 8 characters the markers and dropdowns use.
    """
    go = _go()
    rows = sorted(run.graphs, key=lambda g: (g.group if g.group >= 0 else 1 << 20, g.step))
    fills = [GROUP_FILLS[g.group % len(GROUP_FILLS)] if g.group >= 0 else "#ffffff" for g in rows]
    cells = [
        [g.graph_hash[:8] for g in rows],
        [str(g.group) if g.group >= 0 else "-" for g in rows],
        ["setup" if g.step < 0 else str(g.step) for g in rows],
        [", ".join(map(str, g.steps_ran)) or "-" for g in rows],
        [str(g.instructions or "-") for g in rows],
        [str(g.num_parameters if g.num_parameters is not None else "-") for g in rows],
        [(g.closest or "-")[:8] for g in rows],
        [
            html.escape(_cut(short_paths(g.diff_summary), 300))
            if g.diff_summary
            else "-"
            if g.closest
            else "the run's first graph: nothing earlier to compare"
            for g in rows
        ],
    ]
    if not rows:
        cells = [["-"]] * 7 + [["no graph was recorded"]]
        fills = ["#ffffff"]
    weights = [70, 45, 60, 80, 80, 50, 65, 420]
    fig = go.Figure(
        go.Table(
            columnwidth=weights,
            header=dict(
                values=[
                    f"<b>{h}</b>"
                    for h in (
                        "graph",
                        "group",
                        "compiled at",
                        "ran at steps",
                        "instructions (all computations)",
                        "params",
                        "closest",
                        "difference from the closest earlier graph",
                    )
                ],
                align="left",
            ),
            cells=dict(values=cells, align="left", fill_color=[fills] * len(cells), height=24),
        )
    )
    fig.update_layout(
        title=f"{len(rows)} distinct graph(s) in {len({g.group for g in rows if g.group >= 0})} "
        "near-duplicate group(s)",
        height=table_height(cells, weights, base=130),
        autosize=True,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def _cut(text: str, limit: int) -> str:
    return text[:limit] + ("..." if len(text) > limit else "")


def graph_diff(run: XlaRun, hash_a: str, hash_b: str) -> go.Figure:
    """The HLO diff table from graph ``hash_a`` to graph ``hash_b`` (both must have HLO)."""
    modules = run.modules
    if hash_a not in modules or hash_b not in modules:
        go = _go()
        missing = [h[:8] for h in (hash_a, hash_b) if h not in modules]
        fig = go.Figure()
        fig.update_layout(
            title=f"no HLO for graph(s) {', '.join(missing)}: nothing to diff",
            height=120,
            autosize=True,
            xaxis=dict(visible=False),
            yaxis=dict(visible=False),
        )
        return fig
    a, b = modules[hash_a], modules[hash_b]
    d = diff_modules(a, b)
    fig = diff_table(d, a, b)
    layout = cast("go.Layout", fig.layout)  # plotly's getter is unannotated
    fig.update_layout(title=f"{hash_a[:8]} -> {hash_b[:8]}: {layout.title.text}")
    return fig


def default_pair(run: XlaRun) -> Optional[tuple[str, str]]:
    """The pair worth showing first: the last recompile and the graph it was compared against."""
    for g in reversed(run.graphs):
        if g.recompile and g.closest:
            return g.closest, g.graph_hash
    return None


def run_html(run: XlaRun) -> str:
    """Device, workarounds, per-step explanations and any failure, as an HTML fragment."""
    dev = run.device
    where = str(dev.get("pjrt_device") or "?")
    parts = [
        # a run read from artifacts knows no device: say nothing rather than "on ? x?"
        f"<p><b>{html.escape(run.label)}</b> on {html.escape(where)} "
        f"x{html.escape(str(dev.get('devices', '?')))}: {html.escape(str(dev.get('wrapper', '')))}</p>"
        if where != "?"
        else f"<p><b>{html.escape(run.label)}</b></p>"
    ]
    for w in dev.get("workarounds", []):
        parts.append(f"<p>CPU workaround applied: <code>{html.escape(w)}</code></p>")
    if run.failure is not None:
        f = run.failure
        parts.append(
            f"<p class='finding'><b>The child failed ({html.escape(f.kind)}):</b> {html.escape(f.message)}</p>"
        )
    items = "".join(f"<li>step {s.step}: {html.escape(s.cause)}</li>" for s in run.steps)
    parts.append(f"<ul>{items}</ul>")
    return "\n".join(parts)


def progress_line(msg: dict[str, Any]) -> Optional[str]:
    """One line for a message of the child (``setup``, ``step``, ``error``), or None for the others.

    The runs of notebook 04 take 10-40 s; these lines let a cell say what it is doing meanwhile.
    """
    event = msg.get("event")
    if event == "setup":
        device = msg.get("device") or {}
        seconds = float(msg.get("setup_ms") or 0.0) / 1e3
        return f"model ready on {device.get('pjrt_device', '?')} in {seconds:.1f} s; stepping ..."
    if event == "step":
        wall = float(msg.get("wall_ms") or 0.0) / 1e3
        line = f"step {msg.get('step')}: {wall:.2f} s"
        if "uncached" in msg:
            line += " (compiled)" if msg["uncached"] else " (from the compile cache)"
        return line
    if event in ("error", "input_error"):
        return f"the child failed: {str(msg.get('message', ''))[:300]}"
    return None


__all__ = [
    "GROUP_FILLS",
    "step_timeline",
    "graph_counts",
    "graphs_table",
    "graph_diff",
    "default_pair",
    "run_html",
    "progress_line",
]
