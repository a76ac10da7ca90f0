"""The figures of one checked schedule, as a static page shows them: grid, timeline, buffer
lifetimes and memory per rank over time, each at its overview level of detail.

One place for the set, so ``explorer schedule --format html`` and a notebook's static copy
draw the same figures. Every view bins what a screen cannot tell apart, so the set stays small
at 64 stages x 1024 micro-batches.
"""

from __future__ import annotations

import plotly.graph_objects as go

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.analysis.memory import memory_over_time
from explorer.pipeline.views.grid import grid_figure
from explorer.pipeline.views.lifetimes import lifetimes_figure
from explorer.pipeline.views.memory import empty_memory_figure, memory_figure
from explorer.pipeline.views.timeline import timeline_figure

#: The figures a static schedule page carries, in page order.
FIGURES = ("grid", "timeline", "lifetimes", "memory")


def memory_view(report: Report) -> go.Figure:
    """Memory per rank over time, or why there is none (a deadlock leaves no timeline)."""
    if report.timeline is None:
        return empty_memory_figure(
            "no timeline: the schedule deadlocks, so nothing runs to hold memory"
        )
    return memory_figure(memory_over_time(report.schedule, report.timeline))


def schedule_figures(report: Report) -> dict[str, go.Figure]:
    """``FIGURES`` for ``report``, each over the whole schedule."""
    return {
        "grid": grid_figure(report),
        "timeline": timeline_figure(report),
        "lifetimes": lifetimes_figure(report, None),
        "memory": memory_view(report),
    }


__all__ = ["FIGURES", "memory_view", "schedule_figures"]
