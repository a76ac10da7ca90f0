"""The views of ``explorer read`` on profiler traces: planned vs measured, critical path, bubble; and their page."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from explorer.pipeline.analysis.check import check
from explorer.pipeline.analysis.measured import (
    bubble,
    critical_path,
    measured_vs_simulated,
    planned_schedule,
    waits,
)
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.profiler.job import ProfiledJob


def figures(job: ProfiledJob, planned: Optional[Schedule] = None) -> dict:
    """``planned_vs_measured``, ``critical_path`` and ``bubble`` figures of the job's last iteration."""
    from explorer.pipeline.views.measured import bubble_figure, critical_path_figure
    from explorer.pipeline.views.overlay import overlay_figure

    trace = job.iteration()
    schedule = planned or planned_schedule(trace)
    return {
        "planned_vs_measured": overlay_figure(measured_vs_simulated(check(schedule), trace)),
        "critical_path": critical_path_figure(trace, critical_path(trace), waits(trace)),
        "bubble": bubble_figure(bubble(trace)),
    }


def write_html(job: ProfiledJob, path: str, planned: Optional[Schedule] = None) -> Path:
    """A self-contained page with the three figures."""
    from explorer import inputs
    from explorer.ui.html import page

    figs = figures(job, planned)
    doc = page(
        f"Pipeline job: {job.path}",
        [
            "<h2>Planned vs measured</h2>",
            figs["planned_vs_measured"],
            "<h2>Critical path across ranks</h2>",
            figs["critical_path"],
            "<h2>Bubble per rank</h2>",
            figs["bubble"],
        ],
    )
    inputs.write_text(path, doc, "HTML report")
    return Path(path)


__all__ = ["figures", "write_html"]
