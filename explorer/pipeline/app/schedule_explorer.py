"""``ScheduleExplorer``: pick a schedule, stages, micro-batches, buffers, order and costs; the
grid, the timeline, the buffer lifetimes, memory per rank over time, the gradient check and
the measured overlay answer at once.

The app only wires things: the core builds and checks (:mod:`explorer.pipeline.analysis`), the views
draw (:mod:`explorer.pipeline.views`), and :class:`~explorer.ui.sync.LiveFigure` puts each new
figure on the page. Views send what a screen can show: when the user zooms or pans a figure,
the page reports the new range and only that view is re-rendered for it (exact cells and
bars once the range is small enough, an overview before). Every callback runs through
:meth:`_guarded`, so an exception is said in the status line, not only in the Log Console.
It also works without a live kernel: ``_repr_html_`` and :meth:`to_html` give the current
figures as a self-contained page.

The "Run" seam: pass ``runner(schedule, costs) -> MeasuredTrace``. The Run button calls it,
shows progress beside the button (a runner hands typed records to ``show_progress`` and
``show_result``; this app turns them into words), overlays what it measured with the
simulation re-costed from it, and after a failed run selects the finding at the failing
stage and step. Without a runner the button is disabled and says why.
"""

from __future__ import annotations

import html
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import ipywidgets as w
import plotly.graph_objects as go

from explorer.errors import InputError
from explorer.failure import Failure
from explorer.pipeline.analysis import Costs, Report, check
from explorer.pipeline.analysis.gradients import GradientCount, trains
from explorer.pipeline.analysis.measured import measured_vs_simulated
from explorer.pipeline.analysis.rules import Rule, changed_cells
from explorer.pipeline.app.controls import Controls, ScheduleSettings, control_words
from explorer.pipeline.app.findings_panel import FindingsPanel
from explorer.pipeline.app.sizes_panel import SizesPanel
from explorer.pipeline.printout.listing import summary, verdict_lines
from explorer.pipeline.schedules import Schedule
from explorer.pipeline.schedules.generators import ScheduleKind
from explorer.pipeline.schedules.generators.deepspeed import ExchangeOrder
from explorer.pipeline.traces.follow import RankProgress
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.result import PipelineRunResult
from explorer.pipeline.views.grid import grid_figure
from explorer.pipeline.views.lifetimes import lifetimes_figure
from explorer.pipeline.views.marks import Pinned, finding_cell
from explorer.pipeline.views.overlay import overlay_figure
from explorer.pipeline.views.schedule_figures import memory_view
from explorer.pipeline.views.timeline import timeline_figure
from explorer.ui.guard import guarded
from explorer.ui.html import figure_div, page
from explorer.ui.plot_view import warm_page
from explorer.ui.sync import LiveFigure

#: Launches the real pipeline for a schedule and returns what it measured.
Runner = Callable[[Schedule, Costs], MeasuredTrace]
VIEWS = ("grid", "timeline", "lifetimes", "memory", "overlay")
#: The views that re-render for a zoomed range (memory is always a small overview).
ZOOMABLE = ("grid", "timeline", "lifetimes", "overlay")
#: Gradient findings said in words; the rest are counted.
GRADIENT_LINES = 10
#: Steps shown around a selected finding: its cell is readable, text included.
ZOOM_STEPS = 12
ERROR = "#b00020"


class ScheduleExplorer:
    """The interactive schedule explorer (see the module docstring)."""

    def __init__(
        self,
        kind: ScheduleKind = "1f1b",
        stages: int = 4,
        microbatches: int = 8,
        *,
        chunks: int = 1,
        buffers: Union[None, str] = None,
        order: Optional[ExchangeOrder] = None,
        costs: Costs = Costs(),
        runner: Optional[Runner] = None,
        max_stages: int = 64,
        max_microbatches: int = 1024,
    ) -> None:
        warm_page()  # the page parses plotly.js while the schedule is checked and drawn
        settings = ScheduleSettings(kind, stages, microbatches, chunks, buffers, order, costs)
        self.report: Report = check(
            settings.build(), settings.simulated_costs()
        )  # bad initial settings raise here, with the core's message
        self.settings = settings
        #: The settings the schedule on screen was built from; None while the controls describe
        #: no valid schedule or one given from code is shown (nothing to sweep or fix then).
        self.on_screen: Optional[ScheduleSettings] = settings
        self._not_sweepable = ""
        self.trace: Optional[MeasuredTrace] = None
        self.selected: Optional[Pinned] = None
        self.failed_at: Optional[tuple[int, int]] = None
        self.ranges: dict[str, Optional[tuple[float, float]]] = {name: None for name in VIEWS}
        self.runner = runner
        self.last_render_s = 0.0
        self.errors: list[str] = []
        self.controls = Controls(
            settings, max_stages=max_stages, max_microbatches=max(max_microbatches, microbatches)
        )
        self.status = w.HTML()
        self.problem = w.HTML()
        self.findings = FindingsPanel(self._guarded("selecting a finding", self.select_finding))
        self.moved: list[tuple[int, int]] = []
        #: What moving a control changed besides itself (a kind switch resets what it does not take).
        self.notes: list[str] = []
        self.sizes = SizesPanel(
            lambda: self._make_at_size,
            self._guarded("loading a size", self.load_size),
            self._guarded("applying a fix", self.apply_rules),
            self._guarded,
            default_range=f"2-{max(8, stages)}:1-{max(16, microbatches)}",
            current=self._sweepable_settings,
        )
        self._live = {name: LiveFigure(fig) for name, fig in self._figures(VIEWS).items()}
        for name in ZOOMABLE:
            self._live[name].on_zoom(
                self._guarded(f"zooming the {name}", lambda x, _y, name=name: self._zoomed(name, x))
            )
        for live in self._live.values():
            live.on_error(lambda message: self._say_problem(message))
        self.run_button = w.Button(
            description="Run" if runner else "Run (no runner)",
            icon="play",
            disabled=runner is None,
            button_style="primary" if runner else "",
            tooltip="launch the real pipeline and overlay its timings"
            if runner
            else "pass runner=... to ScheduleExplorer to launch a real pipeline",
        )
        self.run_status = w.HTML(
            "" if runner else "<i>pass runner=PipelineRunner() to run this schedule for real</i>"
        )
        self._run_tooltip = self.run_button.tooltip
        self.run_button.on_click(self._guarded("running", lambda _b: self.run()))
        # One handler each, kept, so a change made from code can pause exactly it (``unobserve_all``
        # would also drop ipywidgets' own observer that syncs a Dropdown's ``index`` to the page).
        self._schedule_handler = self._guarded("rebuilding the schedule", self._on_schedule_change)
        self._lifetimes_handler = self._guarded(
            "redrawing the lifetimes", self._on_lifetimes_change
        )
        for control in self.controls.schedule_widgets:
            control.observe(self._schedule_handler, names="value")
        self.controls.lifetimes_stage.observe(self._lifetimes_handler, names="value")
        self.controls.arrows.observe(
            self._guarded("redrawing the grid", self._on_arrows_change), names="value"
        )
        self.controls.clear_rules.on_click(
            self._guarded("removing the rules", lambda _b: self.apply_rules(None))
        )
        self.gradients = w.HTML()
        self.findings.show(self.report.findings.all())
        self._show_status()
        self.widget = w.VBox(
            [
                self.controls.box(),
                self.problem,
                self.status,
                self.findings.widget,
                w.HTML(
                    "<b>Every size</b>: prove this schedule over a range of sizes, then search for a fix"
                ),
                self.sizes.widget,
                w.HBox(
                    [self.controls.arrows, self.controls.rules_label, self.controls.clear_rules],
                    layout=w.Layout(align_items="center", flex_flow="row wrap"),
                ),
                self._live["grid"].widget,
                self._live["timeline"].widget,
                self.controls.lifetimes_stage,
                self._live["lifetimes"].widget,
                self.gradients,
                self._live["memory"].widget,
                w.HBox([self.run_button, self.run_status], layout=w.Layout(align_items="center")),
                self._live["overlay"].widget,
            ],
            layout=w.Layout(width="100%"),
        )

    @property
    def figures(self) -> dict[str, go.Figure]:
        """The figures the page shows now (the kernel's copies, as last sent)."""
        return {name: live.figure for name, live in self._live.items()}

    # -- errors --------------------------------------------------------------------------------
    def _guarded(self, doing: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with any exception said in the status line (see :mod:`explorer.ui.guard`)."""
        return guarded(doing, fn, self._say_problem)

    def _say_problem(self, message: str) -> None:
        self.errors.append(message)
        self.problem.value = f"<span style='color:{ERROR}'>⚠ {html.escape(message)}</span>"

    # -- rendering -----------------------------------------------------------------------------
    def _figures(self, names: Sequence[str]) -> dict[str, go.Figure]:
        stage = self.controls.lifetimes_stage.value
        cell = finding_cell(self.selected) if self.selected is not None else self.failed_at
        arrows = bool(self.controls.arrows.value)
        build = {
            "grid": lambda: grid_figure(
                self.report,
                arrows=arrows,
                selected=cell,
                x_range=self.ranges["grid"],
                moved=self.moved,
            ),
            "timeline": lambda: timeline_figure(self.report, x_range=self.ranges["timeline"]),
            "lifetimes": lambda: lifetimes_figure(
                self.report,
                None if stage is None or stage < 0 else stage,
                x_range=self.ranges["lifetimes"],
            ),
            "memory": lambda: memory_view(self.report),
            "overlay": lambda: overlay_figure(
                measured_vs_simulated(self.report, self.trace), x_range=self.ranges["overlay"]
            ),
        }
        return {name: build[name]() for name in names}

    def refresh(self) -> None:
        """Rebuild the schedule from the controls and re-render every view (the slider callback)."""
        t0 = time.perf_counter()
        self.controls.update_enabled()
        settings = self.controls.settings()
        try:
            schedule = settings.build()
            report = check(schedule, settings.simulated_costs())
        except InputError as exc:
            self._show_invalid(settings, str(exc))
            return
        self.settings = self.on_screen = settings
        # the rules' cells at this size (the label promises them outlined at every size)
        moved = (
            changed_cells(replace(settings, rules=()).build(), schedule) if settings.rules else []
        )
        self._show_report(report, moved)
        self.sizes.follow(settings)
        self.last_render_s = time.perf_counter() - t0

    def _show_invalid(self, settings: ScheduleSettings, message: str) -> None:
        """The controls describe no valid schedule: say why in the controls' words, and take away
        everything that would still speak for the last valid one as if it were on screen (its
        verdict, its findings, the Run button)."""
        s = self.report.schedule
        self.status.value = (
            f"<span style='color:{ERROR}'>⚠ {html.escape(control_words(message))}</span><br>"
            f"The figures below still show the last valid schedule ({html.escape(s.name)}, "
            f"{s.num_stages} stages × {s.num_microbatches} micro-batches); its verdict and findings "
            "are hidden and Run is off until the settings above are valid." + self._notes_html()
        )
        self.findings.widget.layout.display = "none"
        self.gradients.layout.display = "none"
        self.on_screen = None
        self._not_sweepable = (
            "the settings above are not a valid schedule: change them, then check every size or "
            "search for a fix"
        )
        self._clear_run_words()
        self._enable_run(False, "the settings above are not a valid schedule: change them to run")
        self.sizes.follow(settings)

    def _enable_run(self, on: bool, why: str = "") -> None:
        """Run runs exactly the schedule on screen, so it is off while the controls describe none."""
        if self.runner is None:
            return
        self.run_button.disabled = not on
        self.run_button.tooltip = self._run_tooltip if on else why

    def _notes_html(self) -> str:
        return "".join(f"<br><i>{html.escape(n)}</i>" for n in self.notes)

    def show_schedule(self, schedule: Schedule) -> None:
        """Check and show a schedule built elsewhere (an order read from PyTorch's CSV with
        :mod:`explorer.pipeline.schedules.torch_csv`, an edited order), with the current costs. The
        controls keep their settings: moving one rebuilds from them (the status says so)."""
        self.notes = [
            f"shown: {schedule.name}, given from code; the controls do not describe it, and "
            "moving one rebuilds from them"
        ]
        self._show_report(check(schedule, self.settings.simulated_costs()))
        self.on_screen = None
        self._not_sweepable = (
            "the schedule shown was given from code, not by the controls: move a control to show "
            "the schedule they describe, then check every size or search for a fix"
        )
        self.sizes.follow(None)

    def _sweepable_settings(self) -> ScheduleSettings:
        """What "Check every size" and "Search for a fix" sweep: the settings of the schedule on
        screen. With none (invalid controls, a schedule given from code) they refuse, rather
        than sweep the last valid settings under a screen that shows something else."""
        if self.on_screen is None:
            raise InputError(self._not_sweepable)
        return self.on_screen

    def _clear_run_words(self) -> None:
        """A run's outcome beside Run speaks for the schedule it ran: gone once another is shown."""
        if self.runner is not None:
            self.run_status.value = ""

    def _show_report(self, report: Report, moved: Sequence[tuple[int, int]] = ()) -> None:
        self.report, self.trace, self.selected, self.failed_at = report, None, None, None
        self.moved = list(moved)
        self._clear_run_words()
        self.ranges = {name: None for name in VIEWS}
        self.problem.value = ""
        self.controls.set_stage_options(report.schedule.num_stages)
        self.findings.widget.layout.display = None
        self.gradients.layout.display = None
        self._enable_run(True)
        self.findings.show(report.findings.all())
        self._render(VIEWS)
        self._show_status()

    def _render(self, names: Sequence[str]) -> None:
        for name, fig in self._figures(names).items():
            self._live[name].show(fig)

    def _show_status(self) -> None:
        keep = verdict_lines(self.report)
        if self.settings.simulated_costs() != self.settings.costs:
            keep.append(
                f"costs: each of the {self.settings.chunks} chunks on a rank costs 1/{self.settings.chunks} "
                "of the forward and backward set above (a chunk holds that share of a stage's layers)"
            )
        said = [html.escape(ln) for ln in keep]
        wrong = self.gradient_findings
        if wrong:
            said.append(
                f"<span style='color:{ERROR}'>⚠ {len(wrong):,} (stage, micro-batch) weight "
                "gradient(s) do not reach the optimizer step exactly once (see below the lifetimes)</span>"
            )
        self.status.value = "<br>".join(said) + self._notes_html()
        self.gradients.value = self._gradient_words()

    @property
    def gradient_findings(self) -> tuple[GradientCount, ...]:
        """The check's own gradient findings (part of its verdict, never computed apart)."""
        return self.report.findings.gradients

    def _gradient_words(self) -> str:
        """The gradient check's verdict in words: every count other than one, the first few named."""
        s, wrong = self.report.schedule, self.gradient_findings
        checked = f"{s.num_stages} stages × {s.num_microbatches} micro-batches checked"
        if not trains(s):
            return (
                "<b>Gradients:</b> none to count: a forward-only schedule trains nothing, so no "
                "weight gradient reaches an optimizer step"
            )
        if not wrong:
            return (
                "<b>Gradients:</b> <span style='color:#2a7a2a'>every weight gradient reaches its "
                f"stage's optimizer step exactly once</span> ({checked})"
            )
        items = "".join(f"<li>{html.escape(g.describe())}</li>" for g in wrong[:GRADIENT_LINES])
        more = (
            f"<li>… and {len(wrong) - GRADIENT_LINES:,} more</li>"
            if len(wrong) > GRADIENT_LINES
            else ""
        )
        return (
            f"<b>Gradients:</b> <span style='color:{ERROR}'>{len(wrong):,} (stage, micro-batch) "
            f"weight gradients do not reach the optimizer step exactly once</span> ({checked}; "
            f"a wiped or doubly counted accumulation trains on the wrong gradient without an error)"
            f"<ul>{items}{more}</ul>"
        )

    def _on_schedule_change(self, change: dict) -> None:
        self.notes = []
        if change.get("owner") is self.controls.kind:
            c = self.controls
            adapted = (c.buffers, c.order, c.chunks)
            for control in adapted:
                control.unobserve(self._schedule_handler, names="value")
            try:
                self.notes = c.adapt_to_kind(change["old"], change["new"])
            finally:
                for control in adapted:
                    control.observe(self._schedule_handler, names="value")
        self.refresh()

    def _on_lifetimes_change(self, change: dict) -> None:
        self.ranges["lifetimes"] = None
        self._render(("lifetimes",))

    def _on_arrows_change(self, change: dict) -> None:
        self._render(("grid",))

    def _zoomed(self, name: str, x_range: Optional[str | Sequence[float]]) -> None:
        """The user zoomed ``name`` to ``x_range`` ("auto": reset): send that range's detail."""
        if x_range is None:
            return
        new = None
        if not isinstance(x_range, str):  # the one string is "auto"
            lo, hi = x_range
            new = (lo, hi)
        if new == self.ranges[name]:
            return
        self.ranges[name] = new
        self._render((name,))

    # -- every size, fixes ---------------------------------------------------------------------
    def _make_at_size(self, stages: int, microbatches: int) -> Schedule:
        """The current schedule (kind, buffers, order, rules) at another size."""
        return replace(self.settings, stages=stages, microbatches=microbatches).build()

    def load_size(self, stages: int, microbatches: int) -> None:
        """Show ``stages`` x ``microbatches`` (a click on the sizes map) with its first finding selected."""
        c = self.controls
        self.notes = []
        c.stages.max, c.microbatches.max = (
            max(c.stages.max, stages),
            max(c.microbatches.max, microbatches),
        )
        for control in (c.stages, c.microbatches):
            control.unobserve(self._schedule_handler, names="value")
        c.stages.value, c.microbatches.value = stages, microbatches
        for control in (c.stages, c.microbatches):
            control.observe(self._schedule_handler, names="value")
        self.refresh()
        if self.on_screen is not None and self.findings.findings:  # not the hidden, older ones
            self.findings.select(0)

    def apply_rules(self, rules: Optional[Sequence[Union[Rule, str]]]) -> None:
        """Build the schedule with exactly ``rules`` (rules or their names; they replace the rules
        before, so a second fix chosen does not stack on the first; None: no rule) and mark the
        cells they changed."""
        self.notes = []
        names = () if rules is None else tuple(r if isinstance(r, str) else r.name for r in rules)
        self.controls.rules = names
        self.controls.show_rules()
        self.refresh()

    # -- findings, runs ------------------------------------------------------------------------
    def select_finding(self, finding: Pinned) -> None:
        """Outline ``finding``'s cell on the grid, zoom the grid to it and show its stage's buffer lifetimes."""
        self.selected = finding
        stage, step = finding_cell(finding)
        self.ranges["grid"] = (step - ZOOM_STEPS - 0.5, step + ZOOM_STEPS + 0.5)
        self.ranges["lifetimes"] = None
        lifetimes = self.controls.lifetimes_stage
        lifetimes.unobserve(self._lifetimes_handler, names="value")
        lifetimes.value = stage  # the page's dropdown follows (its synced ``index`` changes too)
        lifetimes.observe(self._lifetimes_handler, names="value")
        self._render(("grid", "lifetimes"))

    def show_trace(self, trace: Optional[MeasuredTrace]) -> None:
        """Overlay a measured trace (from a runner or :func:`explorer.pipeline.traces.read_chrome_trace`),
        with the simulation re-costed from it."""
        self.trace = trace
        self.ranges["overlay"] = None
        self._render(("overlay",))

    def report_progress(self, lines: Sequence[str]) -> None:
        """Progress of a run, beside the Run button (runners call this; plain text)."""
        self.run_status.value = "<br>".join(html.escape(str(ln)) for ln in lines)

    def report_run(self, text: str) -> None:
        """The outcome of a run, beside the Run button (plain text)."""
        self.run_status.value = html.escape(text)

    def show_progress(self, ranks: Sequence[RankProgress]) -> None:
        """Each rank's progress (typed records from a runner), said beside the Run button."""
        self.report_progress(
            [
                "running the real pipeline…",
                *(
                    f"rank {p.rank}: {p.state}, iteration {max(p.iteration, 0)}, step {p.last_step}"
                    for p in ranks
                ),
            ]
        )

    def show_result(self, result: PipelineRunResult) -> None:
        """A finished run (from a runner), said beside the Run button."""
        s = self.report.schedule
        verdict = "bitwise equal to" if result.bitwise_equal_to_reference else "DIFFERENT FROM"
        folder = f" (run folder {result.folder.name})" if result.folder else ""
        self.report_run(
            f"ran {s.name} on {s.num_ranks} processes: losses and gradients "
            f"{verdict} the reference{folder}"
        )

    def run(self) -> Optional[MeasuredTrace]:
        """Call the runner on the current schedule and overlay what it measured."""
        if self.runner is None:
            self.report_run(
                "no runner: pass runner=... to ScheduleExplorer to launch a real pipeline"
            )
            return None
        self.run_button.disabled = True
        self.report_progress([f"starting {self.report.schedule.num_ranks} processes…"])
        try:
            trace = self.runner(self.report.schedule, self.settings.costs)
        except (
            Exception
        ) as exc:  # a failed launch must not kill the app: say what happened, and where
            self.run_status.value = f"<span style='color:{ERROR}'>run failed: {html.escape(f'{type(exc).__name__}: {exc}')}</span>"
            self._point_at_failure(getattr(getattr(exc, "result", None), "failure", None))
            return None
        finally:
            self.run_button.disabled = False
        self.show_trace(trace)
        return trace

    def _point_at_failure(self, failure: Optional[Failure]) -> None:
        """Select the finding the failed run ran into (same stage and step) and outline that cell."""
        if not isinstance(failure, Failure) or failure.stage is None or failure.step is None:
            return
        cell = (int(failure.stage), int(failure.step))
        self.failed_at = cell
        for i, finding in enumerate(self.findings.findings):
            if finding_cell(finding) == cell:
                self.findings.select(i)
                rank = f"rank {failure.rank}, " if failure.rank is not None else ""
                self.findings.say_selected(
                    f"the run failed here ({rank}stage {cell[0]}, step {cell[1]}), as this finding predicts"
                )
                return
        self.ranges["grid"] = (cell[1] - ZOOM_STEPS - 0.5, cell[1] + ZOOM_STEPS + 0.5)
        self._render(("grid",))

    # -- display -------------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: object) -> Optional[dict]:
        """The live widget; IPython adds ``_repr_html_`` as the static fallback."""
        return self.widget._repr_mimebundle_(**kwargs)

    def _static_sections(self) -> list:
        s = self.report.schedule
        found = self.report.findings.all()
        items = "".join(
            f"<li class='finding'>{html.escape(f.describe())}</li>" for f in found[:200]
        )
        more = (
            f"<p>… and {len(found) - 200:,} more (explorer check --json lists them all)</p>"
            if len(found) > 200
            else ""
        )
        head = (
            f"<p>{html.escape(s.name)}: {s.num_stages} stages, {s.num_microbatches} micro-batches. "
            "Static copy: the figures without the live controls.</p>"
            f"<pre>{html.escape(summary(self.report))}</pre><ul>{items}</ul>{more}"
            f"<p>{self._gradient_words()}</p>"
        )
        return [head, *(self._live[name].figure for name in VIEWS)]

    def _repr_html_(self) -> str:
        """A self-contained fragment (plotly.js inlined once) of the current figures."""
        parts = []
        for i, section in enumerate(self._static_sections()):
            parts.append(
                section
                if isinstance(section, str)
                else figure_div(section, include_plotlyjs=i == 1)
            )
        return "<div class='explorer-static'>" + "\n".join(parts) + "</div>"

    def to_html(self, path: Union[None, str, Path] = None) -> str:
        """The current figures as a complete offline page; written to ``path`` when given."""
        s = self.report.schedule
        text = page(
            f"Schedule explorer: {s.name}, {s.num_stages} stages × {s.num_microbatches} micro-batches",
            self._static_sections(),
        )
        if path is not None:
            Path(path).write_text(text)
        return text


__all__ = [
    "Runner",
    "VIEWS",
    "ZOOMABLE",
    "GRADIENT_LINES",
    "ZOOM_STEPS",
    "ERROR",
    "ScheduleExplorer",
]
