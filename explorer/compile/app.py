"""``CompileExplorer``: pick a scenario, a backend and a number of iterations; see what compiled.

The widget only wires controls to pure code: :func:`probe_scenario` produces the records,
:mod:`explorer.compile.views` turns them into figures, and a
:class:`~explorer.ui.sync.LiveFigure` per figure puts each new one on the page whole (a
``FigureWidget`` updated in place opened its tables with blank columns). Every callback runs
through :meth:`CompileExplorer._guarded`, so an exception is said in the status line, not only
in JupyterLab's Log Console. The same figures make the static fallback (``_repr_html_``) for
notebooks rendered where no kernel runs.

torch writes some warnings straight to stderr while a probe runs (Dynamo's six-line
recompile-limit block, inductor's "No CUDA runtime is found"). In a notebook they land between
the outputs of a lesson, so :func:`probe_scenario` keeps them off the page and hands them back
as notes that the explorer says in its own words; errors are untouched and still raise.
"""

from __future__ import annotations

import html
import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import ipywidgets as w

from explorer.compile import views
from explorer.compile.runtime.config import PRESETS_DEVICE, default_backend
from explorer.compile.runtime.run import run_scenario
from explorer.compile.runtime.scenarios import PRESETS
from explorer.compile.traces.records import ProbeResult
from explorer.ui.guard import guarded
from explorer.ui.html import figure_div, page
from explorer.ui.sync import LiveFigure

BACKENDS = ("inductor", "aot_eager", "eager")
ERROR = "#b00020"
#: Why Run is off on a job read from its traces: no probe scenario made it.
READ_JOB = (
    "this job was read from its traces, not run by a probe scenario: choose a scenario to probe one"
)


class _Collect(logging.Filter):
    """Takes torch's warnings off the handlers that would print them, and keeps their text."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("torch") and record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())
            return False
        return True


@contextmanager
def torch_console_warnings() -> Iterator[list[str]]:
    """While inside, torch's logged warnings are collected in the yielded list instead of printed."""
    import torch._dynamo  # noqa: F401 - its log handlers must exist before they are filtered

    collect = _Collect()
    loggers = [
        logging.root,
        *(
            lg
            for name, lg in logging.root.manager.loggerDict.items()
            if name.startswith("torch") and isinstance(lg, logging.Logger)
        ),
    ]
    handlers = list({id(h): h for lg in loggers for h in lg.handlers}.values())
    for handler in handlers:
        handler.addFilter(collect)
    try:
        yield collect.messages
    finally:
        for handler in handlers:
            handler.removeFilter(collect)


def probe_scenario(
    name: str,
    iterations: Optional[int] = None,
    backend: Optional[str] = None,
    notes: Optional[list[str]] = None,
) -> ProbeResult:
    """:func:`~explorer.compile.runtime.run_scenario` with torch's console warnings kept off the page.

    The warnings' text is appended to ``notes`` when given (:func:`views.notes_html` says them
    in the explorer's words); what they report is also in the result's records and diagnosis.
    """
    with torch_console_warnings() as said:
        result = run_scenario(name, iterations, backend)
    if notes is not None:
        notes.extend(said)
    return result


class CompileExplorer:
    """Scenario, backend and iterations in; time plot, compile table, guard table and diagnosis out."""

    def __init__(
        self,
        scenario: str = "cycling",
        backend: Optional[str] = None,
        iterations: Optional[int] = None,
        result: Optional[ProbeResult] = None,
    ) -> None:
        style = {"description_width": "initial"}
        self.scenario = w.Dropdown(
            options=list(PRESETS), value=scenario, description="scenario", style=style
        )
        backends = list(dict.fromkeys([backend or default_backend(PRESETS_DEVICE), *BACKENDS]))
        self.backend = w.Dropdown(
            options=backends,
            value=backends[0],
            description="backend",
            style=style,
            layout=w.Layout(width="14em"),
        )
        self.iterations = w.IntSlider(
            value=iterations or PRESETS[scenario].iterations,
            min=3,
            max=60,
            description="iterations",
            style=style,
            continuous_update=False,
        )
        self.run_button = w.Button(description="Run probe", icon="play", button_style="primary")
        self.status = w.HTML()
        self.summary = w.HTML()
        self.errors: list[str] = []
        self.notes: list[str] = []
        self.time_fig, self.compile_fig, self.guard_fig = LiveFigure(), LiveFigure(), LiveFigure()
        for live in (self.time_fig, self.compile_fig, self.guard_fig):
            live.on_error(self._say_problem)
        self.run_button.on_click(self._guarded("running the probe", lambda _b: self.run()))
        self._scenario_handler = self._guarded("choosing a scenario", self._on_scenario)
        self.scenario.observe(self._scenario_handler, names="value")
        for control in (self.backend, self.iterations):  # the scenario's own handler says it too
            control.observe(
                self._guarded("changing the settings", lambda _c: self._say_shown()),
                names="value",
            )
        controls = w.HBox(
            [self.scenario, self.backend, self.iterations, self.run_button],
            layout=w.Layout(flex_flow="row wrap", align_items="center"),
        )
        self.widget = w.VBox(
            [
                controls,
                self.status,
                self.summary,
                self.time_fig.widget,
                self.compile_fig.widget,
                self.guard_fig.widget,
            ],
            layout=w.Layout(width="100%"),
        )
        self.result: Optional[ProbeResult] = None
        #: The controls' (scenario, backend, iterations) when the result on screen was probed
        #: (None: it was read or given, not probed here), and the status line about it.
        self._probed: Optional[tuple[Any, Any, Any]] = None
        self._result_words = ""
        if result is not None:
            self.show(result)
        else:
            self.run()

    @classmethod
    def open(cls, path: Any) -> "CompileExplorer":
        """The explorer on what a job left behind: a ``TORCH_TRACE`` folder (profiler traces beside
        it optional), read as ``explorer read PATH`` reads it, every rank merged."""
        from pathlib import Path

        from explorer.compile.analysis.from_trace import read_job

        explorer = cls(result=read_job(Path(path)))
        explorer.describe_read()
        return explorer

    def describe_read(self) -> None:
        """Make the controls describe the job on screen: no scenario made it (blank, Run off
        until one is chosen), its backend when the records name it (blank otherwise), and the
        iterations it ran. They used to show ``cycling``, ``inductor`` and 24 iterations over a
        recorded ``limit`` job: Run would have probed something else than the page showed."""
        result = self.result
        self.scenario.unobserve(self._scenario_handler, names="value")
        try:
            self.scenario.value = None
            if result is not None and result.backend:
                if result.backend not in self.backend.options:
                    self.backend.options = [result.backend, *self.backend.options]
                self.backend.value = result.backend
            else:
                self.backend.value = None
            if result is not None and result.iterations:
                n = len(result.iterations)
                self.iterations.value = min(max(n, self.iterations.min), self.iterations.max)
        finally:
            self.scenario.observe(self._scenario_handler, names="value")
        self.run_button.disabled = True
        self.run_button.tooltip = READ_JOB
        self._result_words += f"<br><i>{html.escape(READ_JOB)}.</i>"
        self.status.value = self._result_words

    # -- errors --------------------------------------------------------------------------------
    def _guarded(self, doing: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with any exception said in the status line (see :mod:`explorer.ui.guard`)."""
        return guarded(doing, fn, self._say_problem)

    def _say_problem(self, message: str) -> None:
        """The error, and what the diagnosis and figures below it still describe: an earlier
        result's verdict under the error would read as the answer to what just failed."""
        self.errors.append(message)
        earlier = getattr(self, "result", None)  # not yet set while __init__ builds the controls
        shown = (
            f"<br><i>Below: still the earlier result, {html.escape(earlier.label or 'probe')}.</i>"
            if earlier is not None
            else ""
        )
        self.status.value = f"<span style='color:{ERROR}'>⚠ {html.escape(message)}</span>{shown}"

    # -- work ----------------------------------------------------------------------------------
    def _on_scenario(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        self.iterations.value = PRESETS[change["new"]].iterations
        if self.run_button.tooltip == READ_JOB:
            self.run_button.disabled = False
            self.run_button.tooltip = ""
            if self.backend.value is None:
                self.backend.value = self.backend.options[0]
        self._say_shown()

    def run(self) -> ProbeResult:
        """Probe the selected scenario and show it (exceptions propagate; the Run button's are said)."""
        self.status.value = (
            f"running {html.escape(self.scenario.value)}: {self.iterations.value} iterations under "
            f"<code>{html.escape(self.backend.value)}</code> (compiles take seconds) …"
        )
        if self.scenario.value is None or self.backend.value is None:
            raise ValueError("choose a scenario and a backend first: " + READ_JOB)
        self.run_button.disabled = True
        notes: list[str] = []
        try:
            result = probe_scenario(
                self.scenario.value, self.iterations.value, self.backend.value, notes
            )
        except Exception:
            self.status.value = ""
            raise
        finally:
            self.run_button.disabled = False
        self.notes = notes
        self.show(result)
        self._probed = self._settings()
        return result

    def _settings(self) -> tuple[Any, Any, Any]:
        return (self.scenario.value, self.backend.value, self.iterations.value)

    def _say_shown(self) -> None:
        """The status about the result on screen, and whether the controls still describe it:
        once they are moved, Run probes something else than the diagnosis below."""
        running = self.run_button.disabled and self.run_button.tooltip != READ_JOB
        if self.result is None or running:
            return  # nothing shown, or a probe is running
        if self._probed is not None and self._settings() == self._probed:
            self.status.value = self._result_words
        elif self._probed is None and self.scenario.value is None:
            self.status.value = self._result_words  # a read job: the scenario is still to be chosen
        else:
            self.status.value = self._result_words + (
                f"<br><i>Below: the probe of {html.escape(self.result.label or 'a job')}; the "
                "controls have changed since, so Run probes the settings above, not it.</i>"
            )

    def figures(self) -> list[Any]:
        """The current figures (plain ``go.Figure``), in page order."""
        if self.result is None:
            return []
        return [
            views.iteration_figure(self.result),
            views.compile_table(self.result),
            views.guards_table(self.result),
        ]

    def show(self, result: ProbeResult) -> None:
        """Display ``result``: its diagnosis, any torch notes, and its three figures."""
        self.result = result
        self.summary.value = (
            views.diagnosis_html(result) + views.ranks_html(result) + views.notes_html(self.notes)
        )
        for live, fig in zip((self.time_fig, self.compile_fig, self.guard_fig), self.figures()):
            live.show(fig)
        self._probed = None
        self._result_words = (
            f"{html.escape(result.label or 'probe')}: {len(result.iterations)} iterations, "
            f"{len(result.compiles)} compile event(s)"
        )
        self.status.value = self._result_words

    # -- static copies -------------------------------------------------------------------------
    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        """A static, self-contained fragment of the current figures (plotly.js inlined once)."""
        if self.result is None:
            return "<p>no probe run yet</p>"
        figs = self.figures()
        divs = [figure_div(f, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
        return (
            "<div>"
            + views.diagnosis_html(self.result)
            + views.ranks_html(self.result)
            + "".join(divs)
            + "</div>"
        )

    def to_html(self, path: Optional[str] = None) -> str:
        """A full offline page of the current state; written to ``path`` when given."""
        label = self.result.label if self.result else self.scenario.value
        text = page(
            f"torch.compile probe: {label}",
            [views.diagnosis_html(self.result)] + self.figures()
            if self.result
            else ["<p>no probe run yet</p>"],
        )
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text


__all__ = ["BACKENDS", "ERROR", "torch_console_warnings", "probe_scenario", "CompileExplorer"]
