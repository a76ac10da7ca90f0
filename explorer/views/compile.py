"""Figures for the torch.compile probe: per-iteration time by variant, compile events, guards.

Pure functions of a :class:`~explorer.runtime.compile.records.ProbeResult` returning
``go.Figure`` (never shown here), so tests read ``fig.to_dict()`` and the widget wraps them in
``FigureWidget``. Time is on a log axis: a compile costs seconds, a cached iteration
milliseconds, and both must stay readable on one plot.
"""

from __future__ import annotations

import html
from typing import Any

from explorer.errors import require
from explorer.runtime.compile.records import EAGER, ProbeResult

_PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
_EAGER_COLOUR = "#d62728"


def _go() -> Any:
    return require("plotly.graph_objects", "lab", "Compile-probe figures")


def _colour(label: str, order: list[str]) -> str:
    if label == EAGER or EAGER in label.split("+"):
        return _EAGER_COLOUR
    return _PALETTE[order.index(label) % len(_PALETTE)]


def iteration_figure(result: ProbeResult) -> Any:
    """Per-iteration time, one bar colour per variant, with compile and fallback markers."""
    go = _go()
    labels = [it.variant or "none" for it in result.iterations]
    order = list(dict.fromkeys(labels))
    fig = go.Figure()
    for label in order:
        its = [it for it in result.iterations if (it.variant or "none") == label]
        fig.add_trace(go.Bar(
            x=[it.iteration for it in its], y=[it.ms for it in its], name=f"variant {label}",
            marker_color=_colour(label, order),
            hovertemplate="iteration %{x}<br>%{y:.3f} ms<br>variant " + label + "<extra></extra>",
        ))
    compiled = [it for it in result.iterations if it.compiled]
    ids = {it.iteration: ", ".join(c.compile_id for c in result.compiles if c.iteration == it.iteration) for it in compiled}
    fig.add_trace(go.Scatter(
        x=[it.iteration for it in compiled], y=[it.ms * 1.4 for it in compiled], mode="markers+text",
        name="compile", marker=dict(symbol="triangle-down", size=11, color="black"),
        text=[ids[it.iteration] for it in compiled], textposition="top center",
        hovertemplate="compiled %{text} at iteration %{x}<extra></extra>",
    ))
    fell = [it for it in result.iterations if it.fallback]
    if fell:
        fig.add_trace(go.Scatter(
            x=[it.iteration for it in fell], y=[it.ms * 1.4 for it in fell], mode="markers",
            name="eager fallback", marker=dict(symbol="x", size=10, color=_EAGER_COLOUR),
        ))
    period = result.diagnosis.period if result.diagnosis else None
    cause = result.diagnosis.cause if result.diagnosis else ""
    title = f"{result.label or 'probe'}: time per iteration" + (f" — period {period} ({cause})" if period else f" — {cause}")
    fig.update_layout(
        title=title, barmode="overlay", bargap=0.15, height=380, margin=dict(l=60, r=20, t=50, b=40),
        xaxis=dict(title="iteration", dtick=1 if len(result.iterations) <= 40 else None),
        yaxis=dict(title="ms (log)", type="log"), legend=dict(orientation="h", y=-0.2),
    )
    return fig


def compile_table(result: ProbeResult) -> Any:
    """Every compile event with its iteration, function and reason (guard failure or failure type)."""
    go = _go()
    rows = result.compiles
    why = [c.failed + (f": {c.guard}" if c.guard else "") if c.failed else (c.guard or "first compile") for c in rows]
    fig = go.Figure(go.Table(
        columnwidth=[60, 60, 160, 420],
        header=dict(values=["compile id", "iteration", "function", "reason"], align="left"),
        cells=dict(values=[[c.compile_id for c in rows], [c.iteration for c in rows],
                           [c.function or "?" for c in rows], why], align="left"),
    ))
    fig.update_layout(title=f"{len(rows)} compile event(s)", height=120 + 26 * max(len(rows), 1), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def guards_table(result: ProbeResult) -> Any:
    """For each variant of a frame with several: the guards that set it apart from its siblings."""
    go = _go()
    rows = result.guards
    shown = [[g for g in v.only_here if not g.startswith("___")] or list(v.only_here) for v in rows]
    fig = go.Figure(go.Table(
        columnwidth=[60, 160, 480],
        header=dict(values=["variant", "function", "guards only this variant has"], align="left"),
        cells=dict(values=[[v.compile_id for v in rows], [v.function for v in rows],
                           ["<br>".join(html.escape(g) for g in s[:4]) for s in shown]], align="left"),
    ))
    fig.update_layout(title="guard differences between variants", height=120 + 40 * max(len(rows), 1), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def diagnosis_html(result: ProbeResult) -> str:
    """The diagnosis sentence (and any step error) as an HTML fragment."""
    parts = []
    if result.diagnosis:
        d = result.diagnosis
        cls = "" if d.cause == "steady" else " class='finding'"
        period = f"period {d.period}" if d.period else "no period"
        parts.append(f"<p{cls}><b>{html.escape(d.cause)}, {period}.</b> {html.escape(d.sentence)}</p>")
    if result.error:
        parts.append(f"<p class='finding'>The step failed at {html.escape(result.error)}</p>")
    parts.append(f"<p>backend <code>{html.escape(result.backend or '-')}</code>; compile records from "
                 f"Dynamo's {html.escape(result.source)}; variants from the {html.escape(result.variant_source)}.</p>")
    return "\n".join(parts)
