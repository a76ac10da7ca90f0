"""``ScheduleExplorer``: pick a schedule, stages, micro-batches, buffers, order and costs; the
grid, the timeline, the buffer lifetimes and the measured overlay answer at once.

The app only wires things: the core builds and checks (:mod:`explorer.analysis`), the views
draw (:mod:`explorer.views`), and this class copies each new figure into a ``FigureWidget``
(:class:`~explorer.widgets.sync.LiveFigure`). It also works without a live kernel:
``_repr_html_`` and :meth:`to_html` give the current figures as a self-contained page, so a
notebook rendered on a website still shows them.

The "Run" seam: pass ``runner(schedule, costs) -> MeasuredTrace``. The Run button then calls
it and shows the result with :meth:`show_trace`; without a runner the button is disabled and
says why. The real-pipeline issue plugs ``torch.distributed`` in here, nothing else changes.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Callable, Optional, Union

import ipywidgets as w
import plotly.graph_objects as go

from explorer.analysis import Costs, Report, check
from explorer.errors import InputError
from explorer.report.listing import summary
from explorer.schedules import Schedule
from explorer.traces.records import MeasuredTrace
from explorer.views.grid import grid_figure
from explorer.views.html import figure_div, page
from explorer.views.lifetimes import lifetimes_figure
from explorer.views.marks import finding_cell
from explorer.views.overlay import overlay_figure
from explorer.views.timeline import timeline_figure
from explorer.widgets.controls import Controls, ScheduleSettings
from explorer.widgets.findings_panel import FindingsPanel
from explorer.widgets.sync import LiveFigure

#: Launches the real pipeline for a schedule and returns what it measured.
Runner = Callable[[Schedule, Costs], MeasuredTrace]
VIEWS = ("grid", "timeline", "lifetimes", "overlay")


class ScheduleExplorer:
    """The interactive schedule explorer (see the module docstring)."""

    def __init__(self, kind: str = "1f1b", stages: int = 4, microbatches: int = 8, *, chunks: int = 1,
                 buffers: Union[None, str] = None, order: Optional[str] = None, costs: Costs = Costs(),
                 runner: Optional[Runner] = None, max_stages: int = 64, max_microbatches: int = 512) -> None:
        settings = ScheduleSettings(kind, stages, microbatches, chunks, buffers, order, costs)
        self.report: Report = check(settings.build(), settings.costs)  # bad initial settings raise here, with the core's message
        self.settings = settings
        self.trace: Optional[MeasuredTrace] = None
        self.selected: Optional[object] = None
        self.runner = runner
        self.last_render_s = 0.0
        self.controls = Controls(settings, max_stages=max_stages, max_microbatches=max_microbatches)
        self.status = w.HTML()
        self.findings = FindingsPanel(self.select_finding)
        self._live = {name: LiveFigure(fig) for name, fig in self._figures().items()}
        self.figures: dict[str, go.FigureWidget] = {name: live.widget for name, live in self._live.items()}
        self.run_button = w.Button(description="Run" if runner else "Run (no runner)", icon="play",
                                   disabled=runner is None,
                                   tooltip="launch the real pipeline and overlay its timings" if runner
                                   else "pass runner=... to ScheduleExplorer to launch a real pipeline")
        self.run_button.on_click(lambda _: self.run())
        for control in self.controls.schedule_widgets:
            control.observe(self._on_schedule_change, names="value")
        self.controls.lifetimes_stage.observe(self._on_view_change, names="value")
        self.controls.arrows.observe(self._on_view_change, names="value")
        self.findings.show(self.report.findings.all())
        self._show_status()
        self.widget = w.VBox([
            self.controls.box(), self.status, self.findings.widget,
            w.HBox([self.controls.arrows]), self.figures["grid"], self.figures["timeline"],
            self.controls.lifetimes_stage, self.figures["lifetimes"],
            self.run_button, self.figures["overlay"],
        ])

    # -- rendering -----------------------------------------------------------------------------
    def _figures(self) -> dict[str, go.Figure]:
        stage = self.controls.lifetimes_stage.value if hasattr(self, "controls") else -1
        cell = finding_cell(self.selected) if self.selected is not None else None
        arrows = bool(self.controls.arrows.value) if hasattr(self, "controls") else False
        return {
            "grid": grid_figure(self.report, arrows=arrows, selected=cell),
            "timeline": timeline_figure(self.report),
            "lifetimes": lifetimes_figure(self.report, None if stage is None or stage < 0 else stage),
            "overlay": overlay_figure(self.report, self.trace),
        }

    def refresh(self) -> None:
        """Rebuild the schedule from the controls and re-render every view (the slider callback)."""
        t0 = time.perf_counter()
        self.controls.update_enabled()
        try:
            settings = self.controls.settings()
            report = check(settings.build(), settings.costs)
        except InputError as exc:
            self.status.value = f"<span style='color:#b00020'>⚠ {html.escape(str(exc))}</span> (the figures still show the last valid schedule)"
            return
        self.settings, self.report, self.trace, self.selected = settings, report, None, None
        self.controls.set_stage_options(report.schedule.num_stages)
        self.findings.show(report.findings.all())
        self._render()
        self._show_status()
        self.last_render_s = time.perf_counter() - t0

    def _render(self, only: tuple[str, ...] = VIEWS) -> None:
        figures = self._figures()
        for name in only:
            self._live[name].show(figures[name])

    def _show_status(self) -> None:
        lines = summary(self.report).splitlines()
        keep = [ln.lstrip("# ") for ln in lines if not ln.startswith("#   ")]
        self.status.value = "<br>".join(html.escape(ln) for ln in keep)

    def _on_schedule_change(self, change: dict) -> None:
        self.refresh()

    def _on_view_change(self, change: dict) -> None:
        self._render(("grid", "lifetimes"))

    # -- findings, runs ------------------------------------------------------------------------
    def select_finding(self, finding: object) -> None:
        """Outline ``finding``'s cell on the grid and show its stage's buffer lifetimes."""
        self.selected = finding
        stage, _ = finding_cell(finding)
        lifetimes = self.controls.lifetimes_stage
        lifetimes.unobserve(self._on_view_change, names="value")
        lifetimes.value = stage
        lifetimes.observe(self._on_view_change, names="value")
        self._render(("grid", "lifetimes"))

    def show_trace(self, trace: Optional[MeasuredTrace]) -> None:
        """Overlay a measured trace (from a runner or :func:`explorer.traces.read_chrome_trace`)."""
        self.trace = trace
        self._live["overlay"].show(overlay_figure(self.report, trace))

    def run(self) -> Optional[MeasuredTrace]:
        """Call the runner on the current schedule and overlay what it measured."""
        if self.runner is None:
            self.status.value = "no runner: pass runner=... to ScheduleExplorer to launch a real pipeline"
            return None
        self.run_button.disabled = True
        try:
            trace = self.runner(self.report.schedule, self.settings.costs)
        except Exception as exc:  # a failed launch must not kill the app: say what happened
            self.status.value = f"<span style='color:#b00020'>run failed: {html.escape(f'{type(exc).__name__}: {exc}')}</span>"
            return None
        finally:
            self.run_button.disabled = False
        self.show_trace(trace)
        return trace

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: object) -> dict:
        """The live widget; IPython adds ``_repr_html_`` as the static fallback."""
        return self.widget._repr_mimebundle_(**kwargs)

    def _static_sections(self) -> list:
        s = self.report.schedule
        findings = "".join(f"<li class='finding'>{html.escape(f.describe())}</li>" for f in self.report.findings.all()[:200])
        head = (f"<p>{html.escape(s.name)}: {s.num_stages} stages, {s.num_microbatches} micro-batches. "
                "Static copy: the figures without the live controls.</p>"
                f"<pre>{html.escape(summary(self.report))}</pre><ul>{findings}</ul>")
        return [head, *(go.Figure(self.figures[name]) for name in VIEWS)]

    def _repr_html_(self) -> str:
        """A self-contained fragment (plotly.js inlined once) of the current figures."""
        parts = []
        for i, section in enumerate(self._static_sections()):
            parts.append(section if isinstance(section, str) else figure_div(section, include_plotlyjs=i == 1))
        return "<div class='explorer-static'>" + "\n".join(parts) + "</div>"

    def to_html(self, path: Union[None, str, Path] = None) -> str:
        """The current figures as a complete offline page; written to ``path`` when given."""
        s = self.report.schedule
        text = page(f"Schedule explorer: {s.name}, {s.num_stages} stages × {s.num_microbatches} micro-batches",
                    self._static_sections())
        if path is not None:
            Path(path).write_text(text)
        return text
