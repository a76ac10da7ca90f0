"""Figures for the torch.compile probe: per-iteration time by variant, compile events, guards.

Pure functions of a :class:`~explorer.compile.traces.records.ProbeResult` returning
``go.Figure`` (never shown here), so tests read ``fig.to_dict()`` and the widget hands them to
a ``LiveFigure``. Time is on a log axis: a compile costs seconds, a cached iteration
milliseconds, and both must stay readable on one plot.

Bars carry an explicit width: plotly otherwise infers a trace's bar width from the smallest
gap between its own x values, so a variant that runs every third iteration got bars three
iterations wide that covered its neighbours. The x axis spans exactly the probed iterations.
Tables always have a row (a sentence when there is nothing to list), so no column of a table
the page draws is ever blank.
"""

from __future__ import annotations

import html
import re
from types import ModuleType
from typing import TYPE_CHECKING, Sequence

from explorer.compile.traces.records import EAGER, LIMIT_FAILURE, ProbeResult, frame_of
from explorer.errors import require
from explorer.ui.layout import BOTTOM_LEGEND, BOTTOM_MARGIN, table_height

if TYPE_CHECKING:  # plotly is the lab extra's, imported when a figure is drawn (see _go)
    import plotly.graph_objects as go

_PALETTE = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")
_EAGER_COLOUR = "#d62728"
#: Width of one iteration's bar, in iterations: a gap between neighbours keeps them apart.
BAR_WIDTH = 0.8


def _go() -> ModuleType:
    """plotly.graph_objects, imported when a figure is drawn (plotly is the ``lab`` extra's)."""
    return require("plotly.graph_objects", "lab", "Compile-probe figures")


def _colour(label: str, order: list[str]) -> str:
    if label == EAGER or EAGER in label.split("+"):
        return _EAGER_COLOUR
    return _PALETTE[order.index(label) % len(_PALETTE)]


def _bar_name(label: str) -> str:
    return "ran eagerly (no variant matched)" if label == EAGER else f"variant {label}"


def iteration_figure(result: ProbeResult) -> go.Figure:
    """Per-iteration time, one bar colour per variant, compile markers, and where the limit was hit."""
    go = _go()
    labels = [it.variant or "none" for it in result.iterations]
    order = list(dict.fromkeys(labels))
    fig = go.Figure()
    for label in order:
        its = [it for it in result.iterations if (it.variant or "none") == label]
        fig.add_trace(
            go.Bar(
                x=[it.iteration for it in its],
                y=[it.ms for it in its],
                name=_bar_name(label),
                width=BAR_WIDTH,
                marker_color=_colour(label, order),
                hovertemplate="iteration %{x}<br>%{y:.3f} ms<br>variant "
                + html.escape(label)
                + "<extra></extra>",
            )
        )
    compiled = [it for it in result.iterations if it.compiled]
    ids = {
        it.iteration: ", ".join(
            c.compile_id for c in result.compiles if c.iteration == it.iteration and not c.failed
        )
        for it in compiled
    }
    fig.add_trace(
        go.Scatter(
            x=[it.iteration for it in compiled],
            y=[it.ms * 1.4 for it in compiled],
            mode="markers+text",
            name="compile (its id above)",
            marker=dict(symbol="triangle-down", size=11, color="black"),
            text=[ids[it.iteration] for it in compiled],
            textposition="top center",
            cliponaxis=False,
            hovertemplate="compiled %{text} at iteration %{x}<extra></extra>",
        )
    )
    _mark_limit(fig, result)
    period = result.diagnosis.period if result.diagnosis else None
    cause = result.diagnosis.cause if result.diagnosis else ""
    title = f"{result.label or 'probe'}: time per iteration" + (
        f" — period {period} ({cause})" if period else f" — {cause}"
    )
    first = result.iterations[0].iteration if result.iterations else 0
    last = result.iterations[-1].iteration if result.iterations else 0
    fig.update_layout(
        title=title,
        barmode="overlay",
        height=430,
        autosize=True,
        margin=dict(l=60, r=20, t=70, b=BOTTOM_MARGIN),
        xaxis=dict(
            title="iteration",
            range=[first - 0.5, last + 0.5],
            tick0=first,
            dtick=1 if last - first < 40 else None,
        ),
        yaxis=dict(title="ms (log)", type="log"),
        legend=BOTTOM_LEGEND,
    )
    return fig


def _mark_limit(fig: go.Figure, result: ProbeResult) -> None:
    """A dotted line where a frame hit the recompile limit: from there on, unmatched inputs run eagerly."""
    hits = [c for c in result.compiles if c.failed == LIMIT_FAILURE and c.iteration >= 0]
    if not hits:
        return
    at = hits[0].iteration
    limit = f" ({result.recompile_limit})" if result.recompile_limit is not None else ""
    fig.add_vline(x=at - 0.5, line=dict(color=_EAGER_COLOUR, width=1.5, dash="dot"))
    fig.add_annotation(
        x=at - 0.5,
        y=1,
        yref="paper",
        xanchor="left",
        yanchor="bottom",
        showarrow=False,
        text=f"recompile limit{limit} hit: no new variants from here",
        font=dict(color=_EAGER_COLOUR, size=11),
    )


def _functions(result: ProbeResult) -> dict[str, str]:
    """The function each frame compiles, so a failed compile (no code object recorded) still names it."""
    out: dict[str, str] = {}
    for c in result.compiles:
        if c.function:
            out.setdefault(frame_of(c.compile_id), c.function)
    return out


def _table(
    header: list[str], columns: list[list[str]], weights: list[float], title: str
) -> go.Figure:
    go = _go()
    fig = go.Figure(
        go.Table(
            columnwidth=weights,
            header=dict(
                values=[f"<b>{html.escape(h)}</b>" for h in header],
                align="left",
                fill_color="#e8eaf0",
            ),
            cells=dict(values=columns, align="left", height=24),
        )
    )
    fig.update_layout(
        title=title,
        height=table_height(columns, weights),
        autosize=True,
        margin=dict(l=10, r=10, t=40, b=10),
    )
    return fig


def compile_table(result: ProbeResult) -> go.Figure:
    """Every compile event with its iteration, function and reason (guard failure or failure type)."""
    rows = result.compiles
    names = _functions(result)
    if not rows:
        columns = [
            ["-"],
            ["-"],
            ["-"],
            ["nothing compiled: the step never reached torch.compile'd code"],
        ]
    else:
        why = [
            c.failed + (f": {c.guard}" if c.guard else "")
            if c.failed
            else (c.guard or "first compile")
            for c in rows
        ]
        columns = [
            [c.compile_id for c in rows],
            [str(c.iteration) if c.iteration >= 0 else "?" for c in rows],
            [c.function or names.get(frame_of(c.compile_id), "?") for c in rows],
            [html.escape(w) for w in why],
        ]
    return _table(
        ["compile id", "iteration", "function", "reason"],
        columns,
        [60, 60, 160, 420],
        f"{len(rows)} compile event(s)",
    )


def guards_table(result: ProbeResult) -> go.Figure:
    """For each variant of a frame with several: the guards that set it apart from its siblings."""
    rows = result.guards
    if not rows:
        columns = [
            ["-"],
            ["-"],
            ["no frame has more than one compiled variant: nothing to tell apart"],
        ]
    else:
        shown = [
            [g for g in v.only_here if not g.startswith("___")] or list(v.only_here) for v in rows
        ]
        columns = [
            [v.compile_id for v in rows],
            [v.function for v in rows],
            ["<br>".join(html.escape(g) for g in s[:4]) or "(no guard of its own)" for s in shown],
        ]
    return _table(
        ["variant", "function", "guards only this variant has"],
        columns,
        [60, 160, 480],
        "guard differences between variants",
    )


def diagnosis_html(result: ProbeResult) -> str:
    """The diagnosis sentence (and any step error) as an HTML fragment."""
    parts = []
    if result.diagnosis:
        d = result.diagnosis
        cls = "" if d.cause == "steady" else " class='finding'"
        period = f"period {d.period}" if d.period else "no period"
        parts.append(
            f"<p{cls}><b>{html.escape(d.cause)}, {period}.</b> {html.escape(d.sentence)}</p>"
        )
    if result.error:
        parts.append(f"<p class='finding'>The step failed at {html.escape(result.error)}</p>")
    backend = (
        f"backend <code>{html.escape(result.backend)}</code>"
        if result.backend
        else "backend not named in these records"
    )
    parts.append(
        f"<p>{backend}; compile records from "
        f"Dynamo's {html.escape(result.source)}; variants from the {html.escape(result.variant_source)}.</p>"
    )
    return "\n".join(parts)


_LIMIT = re.compile(r"hit config\.(\w+) \((\d+)\)")
_FUNCTION = re.compile(r"function: '([^']+)'")


def explain_torch_message(text: str) -> str:
    """One console warning of torch, said the way the explorer says things (first line, plain words)."""
    limit = _LIMIT.search(text)
    if limit:
        fn = _FUNCTION.search(text)
        where = f" on '{fn.group(1)}'" if fn else ""
        return (
            f"Dynamo hit its {limit.group(1)} ({limit.group(2)}){where}: inputs that match no cached "
            "variant now run eagerly (the diagnosis counts those iterations)."
        )
    if "No CUDA runtime is found" in text:
        home = re.search(r"CUDA_HOME='([^']*)'", text)
        return (
            f"torch found no CUDA runtime{' (CUDA_HOME=' + home.group(1) + ')' if home else ''}; "
            "harmless here: the probe runs on the CPU."
        )
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    first = re.sub(r"^[WEI]\d{4} [\d:.]+ \d+ \S+\] (\[[^\]]*\] )?", "", first)
    return f"torch warned: {first[:300]}"


def notes_html(messages: Sequence[str]) -> str:
    """torch's console warnings during a probe, each once, in the explorer's words ('' when none)."""
    said = list(dict.fromkeys(explain_torch_message(m) for m in messages))
    if not said:
        return ""
    items = "".join(f"<li>{html.escape(s)}</li>" for s in said)
    return f"<p>While probing, torch said (kept off the page's output, here in short):</p><ul>{items}</ul>"


def ranks_html(result: ProbeResult) -> str:
    """Each rank's verdict, where ranks differ, and what the records cannot tell ('' for one probe run).

    A report merged over ranks (``--nproc``) or read from a job's traces (``explorer read``)
    carries these; a plain probe run has none of them.
    """
    parts = []
    if len(result.ranks) > 1:
        rows = "".join(
            f"<li>rank {r['rank']}: {len(r['compiles'])} compiles, {r['iterations']} iterations; "
            f"{html.escape(str(r['cause']))}"
            + (f", period {r['period']} ({r['confidence']})" if r["period"] else "")
            + "</li>"
            for r in result.ranks
        )
        parts.append(
            f"<p>{len(result.ranks)} ranks, merged: an iteration takes the slowest rank's time.</p><ul>{rows}</ul>"
        )
    if result.divergence:
        items = "".join(f"<li>{html.escape(d)}</li>" for d in result.divergence)
        parts.append(f"<p class='finding'><b>Ranks differ.</b></p><ul>{items}</ul>")
    if result.notes:
        items = "".join(f"<li>{html.escape(n)}</li>" for n in result.notes)
        parts.append(f"<p>What the records cannot tell, or tell only in part:</p><ul>{items}</ul>")
    return "\n".join(parts)


__all__ = [
    "BAR_WIDTH",
    "iteration_figure",
    "compile_table",
    "guards_table",
    "diagnosis_html",
    "explain_torch_message",
    "notes_html",
    "ranks_html",
]
