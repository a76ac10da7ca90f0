"""Measured versus simulated: bars from a real run beside the simulated ones, per stage.

Each stage row holds two lanes: the simulated bar (faded, above) and the measured one
(solid, below). Simulated time is in ticks and measured time in seconds, so simulated times
are scaled by one *tick length*: the median ratio of measured to simulated duration of the
forward passes (said in the title), so the per-kind panel shows how far the other kinds'
measured costs are from the costs the simulation assumed relative to a forward. Measured times start at the trace's
earliest event, so a stage that starts late in reality starts late here too. Rows are matched
by ``(stage, kind, micro-batch)`` because a profiler does not know DeepSpeed's steps. The
lower panel gives the mean duration per instruction kind, simulated beside measured.

Without a trace the figure is the simulated half with a note: the hook the "Run" control
fills once the real pipeline exists.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import plotly.graph_objects as go

from explorer.analysis.check import Report
from explorer.schedules.instructions import COMPUTE_KINDS, Kind
from explorer.traces.records import MeasuredTrace
from explorer.views.axes import row_height, stage_labels
from explorer.views.bars import MAX_SVG_BARS, hbars
from explorer.views.palette import KIND_COLOURS, kind_label
from explorer.views.words import short_texts

_COMPUTE = np.array(sorted(int(k) for k in COMPUTE_KINDS))
EMPTY_NOTE = ("No measured trace yet: run the real pipeline (the Run control) or load a profiler trace "
              "with explorer.traces.read_chrome_trace and pass it to show_trace().")


def tick_length(report: Report, trace: MeasuredTrace) -> tuple[float, np.ndarray]:
    """Measured units per simulated tick, and each measured row's simulated row (-1: none)."""
    s, tl = report.schedule, report.timeline
    width = int(max(s.num_microbatches, int(trace.microbatch.max(initial=0)) + 1)) + 1
    def key(stage, kind, mb):  # noqa: E306 - one line, local on purpose
        return (stage.astype(np.int64) * len(Kind) + kind.astype(np.int64)) * width + (mb.astype(np.int64) + 1)
    sim_keys, first = np.unique(key(s.stage, s.kind, s.microbatch), return_index=True)
    mkeys = key(trace.stage, trace.kind, trace.microbatch)
    pos = np.clip(np.searchsorted(sim_keys, mkeys), 0, max(len(sim_keys) - 1, 0))
    found = (len(sim_keys) > 0) & (sim_keys[pos] == mkeys) if len(sim_keys) else np.zeros(len(mkeys), bool)
    sim_row = np.where(found, first[pos] if len(first) else -1, -1)
    if tl is None:
        return 1.0, sim_row
    ok = (sim_row >= 0) & (trace.kind == Kind.FORWARD)
    if not ok.any():  # forward-less traces (a backward-only probe): fall back to every compute kind
        ok = (sim_row >= 0) & np.isin(trace.kind, _COMPUTE)
    sim_dur = (tl.end - tl.start)[sim_row[ok]]
    meas_dur = (trace.end - trace.start)[ok]
    good = (sim_dur > 0) & (meas_dur > 0)
    return (float(np.median(meas_dur[good] / sim_dur[good])) if good.any() else 1.0), sim_row


def overlay_figure(report: Report, trace: Optional[MeasuredTrace] = None, *, max_bars: int = MAX_SVG_BARS) -> go.Figure:
    """Simulated and (when given) measured bars per stage, and mean duration per kind."""
    s, tl = report.schedule, report.timeline
    fig = go.Figure()
    if tl is None:
        fig.update_layout(title=dict(text="Measured vs simulated · no simulation: the schedule deadlocks"), height=300)
        return fig
    scale, sim_row = (1.0, np.zeros(0, dtype=np.int64)) if trace is None else tick_length(report, trace)
    unit = "ticks" if trace is None else trace.unit
    offset = 0.0 if trace is None or not len(trace) else float(trace.start.min())
    sim_dur = tl.end - tl.start
    shown = sim_dur > 0
    for kind in Kind:
        rows = np.nonzero(shown & (s.kind == kind))[0]
        if not len(rows):
            continue
        fig.add_trace(hbars(f"simulated {kind.code}", s.stage[rows] - 0.2, tl.start[rows] * scale, tl.end[rows] * scale,
                            KIND_COLOURS[kind], width=0.36, opacity=0.45, max_bars=max_bars, showlegend=False,
                            hover=[f"simulated {st}{c}: {a * scale:.4g} → {b * scale:.4g} {unit}" for st, c, a, b in
                                   zip(s.stage[rows].tolist(), short_texts(s, rows), tl.start[rows].tolist(), tl.end[rows].tolist())]
                            if len(rows) <= max_bars else None))
    per_kind_sim, per_kind_meas = [], []
    for kind in Kind:
        mine = np.zeros(0, dtype=np.int64) if trace is None else np.nonzero(trace.kind == kind)[0]
        sim_rows = np.nonzero(s.kind == kind)[0]
        if len(sim_rows) and sim_dur[sim_rows].max() > 0:
            per_kind_sim.append((kind, float(sim_dur[sim_rows].mean() * scale)))
        if not len(mine):
            continue
        per_kind_meas.append((kind, float((trace.end[mine] - trace.start[mine]).mean())))
        hover = None
        if trace is not None and len(mine) <= max_bars:
            hover = [_measured_hover(trace, int(i), int(sim_row[i]), sim_dur, scale) for i in mine.tolist()]
        fig.add_trace(hbars(f"measured {kind.code}", trace.stage[mine] + 0.2, trace.start[mine] - offset,
                            trace.end[mine] - offset, KIND_COLOURS[kind], width=0.36, max_bars=max_bars,
                            hover=hover, showlegend=False))
    fig.add_trace(go.Bar(name="simulated", x=[kind_label(k) for k, _ in per_kind_sim], y=[v for _, v in per_kind_sim],
                         marker=dict(color="#bbbbbb"), xaxis="x2", yaxis="y2"))
    meas = dict(per_kind_meas)
    sim = dict(per_kind_sim)
    fig.add_trace(go.Bar(name="measured", x=[kind_label(k) for k, _ in per_kind_meas], y=[v for _, v in per_kind_meas],
                         marker=dict(color="#444444"),
                         hovertext=[f"measured − simulated: {v - sim.get(k, 0.0):+.4g} {unit}" for k, v in meas.items()],
                         xaxis="x2", yaxis="y2"))
    if trace is None:
        title = "Measured vs simulated · simulated only (ticks)"
    else:
        title = (f"Measured vs simulated · {len(trace)} measured instructions ({trace.source or 'trace'}) · "
                 f"1 tick = {scale:.4g} {unit} · {int((sim_row < 0).sum())} without a simulated counterpart")
    # Two panels laid out by hand (make_subplots costs a fifth of a re-render).
    panel = dict(xref="paper", yref="paper", x=0.5, xanchor="center", yanchor="bottom", showarrow=False, font=dict(size=13))
    notes = [dict(text="per stage: simulated (faded) above, measured below", y=1.0, **panel),
             dict(text="mean duration per instruction kind", y=0.22, **panel)]
    if trace is None:
        notes.append(dict(text=EMPTY_NOTE, x=0.5, y=0.36, xref="paper", yref="paper", showarrow=False,
                          font=dict(size=11, color="#666"), bgcolor="rgba(255,255,255,0.8)"))
    fig.update_layout(
        title=dict(text=title), barmode="group", height=row_height(s.num_stages, per_row=34.0, extra=360.0),
        margin=dict(l=10, r=10, t=80, b=40), plot_bgcolor="white", showlegend=True, legend=dict(font=dict(size=10)),
        annotations=notes,
        xaxis=dict(anchor="y", domain=[0, 1], title=dict(text=f"time ({unit})")),
        yaxis=dict(anchor="x", domain=[0.5, 0.94], tickvals=list(range(s.num_stages)), ticktext=stage_labels(s),
                   autorange="reversed"),
        xaxis2=dict(anchor="y2", domain=[0, 1]),
        yaxis2=dict(anchor="x2", domain=[0, 0.2], title=dict(text=unit)),
    )
    return fig


def _measured_hover(trace: MeasuredTrace, i: int, sim: int, sim_dur: np.ndarray, scale: float) -> str:
    kind = Kind(int(trace.kind[i]))
    dur = float(trace.end[i] - trace.start[i])
    text = f"measured {int(trace.stage[i])}{kind.code}{int(trace.microbatch[i]) if trace.microbatch[i] >= 0 else ''}: {dur:.4g} {trace.unit}"
    if sim >= 0:
        text += f" (simulated {sim_dur[sim] * scale:.4g}, difference {dur - sim_dur[sim] * scale:+.4g})"
    return text
