"""``XlaExplorer``: pick a scenario and FSDP options, run real XLA steps, see what compiled and why.

The Run control starts the child process from a background thread, so the kernel stays free
while XLA compiles; each message of the child moves the progress bar and the status line, and
the figures are refreshed once the run is assembled (each through a
:class:`~explorer.ui.sync.LiveFigure`, which sends the whole figure, so tables open
complete). ``run(block=True)`` runs in the caller's thread instead, for scripts and tests.
Clicking a new-graph marker on the timeline diffs that graph against the earlier graph it was
compared with; the two dropdowns diff any pair. Every callback runs through
:meth:`XlaExplorer._guarded`: an exception is said in the status line, where a person looks,
instead of only in JupyterLab's Log Console. :func:`print_progress` gives a notebook cell that
runs steps the same progress lines as the status line.
"""

from __future__ import annotations

import html
import threading
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Optional

import ipywidgets as w

from explorer.errors import InputError
from explorer.ui.guard import guarded
from explorer.ui.html import figure_div, page
from explorer.ui.sync import LiveFigure
from explorer.xla.runtime.config import RunConfig
from explorer.xla.runtime.presets import PRESETS
from explorer.xla.runtime.run import run as run_config
from explorer.xla.traces.records import CONFIG_FILE, XlaRun
from explorer.xla.views import runs as views

ERROR = "#b00020"
#: The config fields the controls show; the others travel in ``XlaExplorer.options``.
CONTROLLED = ("scenario", "steps", "layers", "bucket_mb", "fsdp")
#: Why Run is off after opening artifacts that do not say which scenario made them.
UNKNOWN_SCENARIO = (
    "these artifacts do not say which scenario made them: choose a scenario to run one"
)


def print_progress(msg: dict[str, Any]) -> None:
    """Print one line per step of a run (``run_scenario(..., progress=print_progress)``), so a long
    notebook cell says what it is doing instead of staying silent for tens of seconds."""
    line = views.progress_line(msg)
    if line:
        print(line, flush=True)


def _config_beside(path: Path) -> Optional[RunConfig]:
    """The config the explorer's own run wrote into its folder, or None (artifacts from elsewhere)."""
    folder = path if path.is_dir() else path.parent
    try:
        return RunConfig.from_json((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, InputError):
        return None


def _notes_html(got: Any) -> str:
    """What the artifacts could not answer, and graphs sharing a hash, as a short list."""
    items = [
        f"same Graph Hash {html.escape(s.graph_hash[:8])}, different HLO (save-file lines "
        f"{s.lines}): {html.escape(s.diff_summary)}"
        for s in got.same_hash_different_text
    ]
    items += [f"not in these artifacts: {html.escape(n)}" for n in got.cannot_answer]
    return "<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


class XlaExplorer:
    """Scenario and options in; step timeline, graph groups and a graph-to-graph diff out."""

    def __init__(
        self,
        scenario: str = "steady",
        steps: int = 0,
        run: Optional[XlaRun] = None,
        autorun: bool = False,
        **options: Any,
    ) -> None:
        style = {"description_width": "initial"}
        preset = PRESETS[scenario]
        self.options = options
        self.scenario = w.Dropdown(
            options=list(PRESETS), value=scenario, description="scenario", style=style
        )
        self.steps = w.IntSlider(
            value=steps or preset.steps, min=2, max=30, description="steps", style=style
        )
        self.layers = w.IntSlider(
            value=options.pop("layers", 1), min=1, max=4, description="layers", style=style
        )
        self.bucket = w.BoundedFloatText(
            value=options.pop("bucket_mb", preset.bucket_mb or 0.0),
            min=0.0,
            max=1e4,
            description="bucket MB",
            style=style,
            layout=w.Layout(width="12em"),
        )
        self.fsdp = w.Dropdown(
            options=[("FSDP v1 (world size 1)", "v1"), ("SPMD FSDPv2 (4 CPU devices)", "v2")],
            value=options.pop("fsdp", "v1"),
            description="FSDP",
            style=style,
        )
        self.run_button = w.Button(
            description="Run",
            icon="play",
            button_style="primary",
            tooltip="run the steps in a child process (the kernel stays free)",
        )
        self.progress = w.IntProgress(value=0, min=0, max=1, description="progress")
        self.status = w.HTML()
        self._said = ""
        self.errors: list[str] = []
        self.graph_a = w.Dropdown(description="diff from", style=style)
        self.graph_b = w.Dropdown(description="to", style=style)
        empty = views._go().Figure()
        self.timeline = LiveFigure(empty)
        self.graphs = LiveFigure(empty)
        self.diff = LiveFigure(empty)
        for live in (self.timeline, self.graphs, self.diff):
            live.on_error(self._say_problem)
        self.timeline.on_click(self._guarded("diffing the clicked graph", self._on_marker))
        self.run_button.on_click(
            self._guarded("starting the run", lambda _b: self.run(block=False))
        )
        self._scenario_handler = self._guarded("choosing a scenario", self._on_scenario)
        self.scenario.observe(self._scenario_handler, names="value")
        for control in self._controls()[1:]:  # the scenario's own handler says it too
            control.observe(
                self._guarded("changing the settings", lambda _c: self._say_controls()),
                names="value",
            )
        for dd in (self.graph_a, self.graph_b):
            dd.observe(
                self._guarded("diffing the chosen graphs", lambda _c: self._show_diff()),
                names="value",
            )
        row = dict(flex_flow="row wrap", align_items="center")
        controls = w.VBox(
            [
                w.HBox([self.scenario, self.steps, self.layers], layout=w.Layout(**row)),
                w.HBox(
                    [self.fsdp, self.bucket, self.run_button, self.progress], layout=w.Layout(**row)
                ),
            ]
        )
        self.widget = w.VBox(
            [
                controls,
                self.status,
                self.timeline.widget,
                self.graphs.widget,
                w.HBox([self.graph_a, self.graph_b], layout=w.Layout(**row)),
                self.diff.widget,
            ],
            layout=w.Layout(width="100%"),
        )
        self.result: Optional[XlaRun] = None
        self.read: Optional[Any] = None
        #: The settings the run on screen ran with, when known (this explorer's Run, or the config
        #: an opened folder keeps beside its artifacts), and what the status says about that run.
        self._shown_config: Optional[RunConfig] = None
        self._run_words = ""
        self._controls_note = ""
        self._quiet = False
        self._thread: Optional[threading.Thread] = None
        if run is not None:
            self.show(run)
        elif autorun:
            self.run(block=True)

    @classmethod
    def open(cls, path: str) -> "XlaExplorer":
        """An explorer on what a run left behind (a folder or file of XLA artifacts), no new run.

        The Run control stays usable for a fresh run of a preset; the notes say which questions
        the artifacts could not answer. ``self.read`` keeps the whole reading (notes, graphs that
        share a hash but not a program).
        """
        from pathlib import Path

        from explorer.xla.analysis.from_artifacts import read_artifacts

        got = read_artifacts(Path(path))
        explorer = cls(run=got.run)
        explorer.read = got
        explorer.describe_opened(_config_beside(Path(path)), len(got.run.steps))
        explorer._run_words = views.run_html(got.run) + _notes_html(got)
        explorer._say_controls()
        return explorer

    def describe_opened(self, cfg: Optional[RunConfig], steps: int) -> None:
        """Make the controls describe the run on screen, so Run runs it again and nothing else.

        A folder the explorer's own run wrote keeps that run's config beside the artifacts: the
        controls take every value of it. Artifacts from elsewhere (a TPU job) do not say which
        scenario made them: the scenario is left blank and Run is off until one is chosen.
        """
        self.scenario.unobserve(self._scenario_handler, names="value")
        try:
            if cfg is not None and cfg.scenario in PRESETS:
                self.scenario.value = cfg.scenario
                self.steps.value = min(max(cfg.steps, self.steps.min), self.steps.max)
                self.layers.value = min(max(cfg.layers, self.layers.min), self.layers.max)
                self.bucket.value = float(cfg.bucket_mb or 0.0)
                self.fsdp.value = cfg.fsdp
                default = RunConfig()
                self.options = {
                    f.name: getattr(cfg, f.name)
                    for f in fields(RunConfig)
                    if f.name not in CONTROLLED and getattr(cfg, f.name) != getattr(default, f.name)
                }
                self._shown_config = self._config_or_none()
                self._controls_note = (
                    "<p><i>The controls show this run's settings: Run runs it again.</i></p>"
                )
            else:
                self.scenario.value = None
                self.steps.value = min(max(steps, self.steps.min), self.steps.max)
                self.run_button.disabled = True
                self.run_button.tooltip = UNKNOWN_SCENARIO
                self._controls_note = f"<p><i>{html.escape(UNKNOWN_SCENARIO)}.</i></p>"
        finally:
            self.scenario.observe(self._scenario_handler, names="value")

    def _guarded(self, doing: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` with any exception said in the status line (see :mod:`explorer.ui.guard`)."""
        return guarded(doing, fn, self._say_problem)

    def _say_problem(self, message: str) -> None:
        """Put ``message`` at the top of the status line, above what it said before (until it
        changes), and say what the figures below still show: an earlier run's verdict right under
        an error would read as the answer to what just failed."""
        self.errors.append(message)
        earlier = getattr(self, "result", None)  # not yet set while __init__ builds the controls
        shown = (
            f"<p><i>Below: still the earlier run, {html.escape(earlier.label or 'run')}.</i></p>"
            if earlier is not None
            else ""
        )
        self.status.value = (
            f"<p style='color:{ERROR}'>⚠ {html.escape(message)}</p>{shown}" + self._said
        )

    def _controls(self) -> tuple[w.ValueWidget, ...]:
        return (self.scenario, self.steps, self.layers, self.bucket, self.fsdp)

    def _config_or_none(self) -> Optional[RunConfig]:
        """The run the controls describe, resolved as Run resolves it (None: Run would refuse)."""
        try:
            return self.config().resolved()
        except (InputError, TypeError, ValueError):
            return None

    def _say_controls(self) -> None:
        """The status about the run on screen, and whether the controls still describe it: once
        they are moved, Run runs something else than the run below, and the page says so."""
        running = self._thread is not None and self._thread.is_alive()
        if self.result is None or (running and threading.current_thread() is not self._thread):
            return  # nothing shown yet, or a run's progress owns the status line
        now = self._config_or_none()
        if self._shown_config is not None and now == self._shown_config:
            note = self._controls_note
        elif self._shown_config is None and self.scenario.value is None:
            note = self._controls_note  # opened artifacts: the scenario is still to be chosen
        else:
            note = (
                f"<p><i>Below: the run {html.escape(self.result.label or 'shown')}; the controls "
                "have changed since, so Run runs the settings above, not it.</i></p>"
            )
        self._say(self._run_words + note)

    def _say(self, text: str) -> None:
        """Set the status line (an earlier problem stays in ``errors``)."""
        self._said = text
        self.status.value = text

    def _on_scenario(self, change: dict[str, Any]) -> None:
        if change["new"] is None:
            return
        preset = PRESETS[change["new"]]
        self.steps.value = preset.steps
        self.bucket.value = preset.bucket_mb or 0.0
        if self.run_button.tooltip == UNKNOWN_SCENARIO:
            self.run_button.disabled = False
            self.run_button.tooltip = "run the steps in a child process (the kernel stays free)"
        self._say_controls()

    def config(self) -> RunConfig:
        """The run the controls describe."""
        return RunConfig(
            scenario=self.scenario.value,
            steps=self.steps.value,
            layers=self.layers.value,
            bucket_mb=self.bucket.value,
            fsdp=self.fsdp.value,
            **self.options,
        )

    def _progress(self, msg: dict[str, Any]) -> None:
        if msg["event"] == "begin":
            self._say(f"<p>step {msg['step']} running (a compile takes seconds on CPU) ...</p>")
            return
        if msg["event"] == "step":
            self.progress.value = msg["step"] + 1
        line = views.progress_line(msg)
        if line:
            self._say(f"<p>{html.escape(line)}</p>")

    def run(self, block: bool = True) -> Optional[XlaRun]:
        """Run the configured steps; with ``block=False`` in a background thread (returns None)."""
        cfg = self.config().resolved()  # bad options raise here, with the config's message
        self.progress.max, self.progress.value = cfg.steps, 0
        self._say(f"<p>starting a child process for {html.escape(cfg.label)} ...</p>")
        self.run_button.disabled = True
        if block:
            return self._work(cfg)
        self._thread = threading.Thread(target=self._work, args=(cfg,), daemon=True)
        self._thread.start()
        return None

    def wait(self, timeout: Optional[float] = None) -> Optional[XlaRun]:
        """Wait for a background run and return its result."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.result

    def _work(self, cfg: RunConfig) -> Optional[XlaRun]:
        doing = "running the steps"
        try:
            result = run_config(cfg, progress=self._progress)
            doing = "showing the run"
            self._controls_note = ""
            self.show(result)
            self._shown_config = cfg
            self._say_controls()  # the controls may have moved while it ran
            return result
        except (
            Exception
        ) as exc:  # shown in the page: a background thread has nowhere else to report
            self._say("")
            self._say_problem(f"while {doing}: {type(exc).__name__}: {exc}")
            return None
        finally:
            self.run_button.disabled = False

    def show(self, result: XlaRun) -> None:
        """Display ``result``: status, timeline, graph table, and the most telling diff."""
        self.result = result
        self._run_words = views.run_html(result)
        self._say(self._run_words)
        self.timeline.show(views.step_timeline(result))
        self.graphs.show(views.graphs_table(result))
        options = [
            (
                f"{g.graph_hash[:8]} ({'setup' if g.step < 0 else 'step ' + str(g.step)})",
                g.graph_hash,
            )
            for g in result.graphs
            if g.graph_hash in result.modules
        ]
        pair = views.default_pair(result)
        if pair and not all(h in result.modules for h in pair):
            pair = None  # a graph without its HLO (artifacts with some dumps missing): not offered
        self._quiet = True
        try:
            self.graph_a.options, self.graph_b.options = list(options), list(options)
            if pair:
                self.graph_a.value, self.graph_b.value = pair
            elif len(options) >= 2:
                self.graph_a.value, self.graph_b.value = options[-2][1], options[-1][1]
        finally:
            self._quiet = False
        self._show_diff()

    def _on_marker(self, points: list) -> None:
        """A click on a new-graph marker (the timeline's last trace): diff that graph against its closest earlier graph."""
        traces = list(self.timeline.figure.select_traces())  # ``figure.data``, in order
        if self.result is None or not traces:
            return
        last = len(traces) - 1
        hits = [p for p in points if p.get("curve") == last and isinstance(p.get("index"), int)]
        if not hits or traces[last].customdata is None:
            return
        g = self.result.graph(traces[last].customdata[hits[0]["index"]])
        if g is not None and g.closest and g.graph_hash in self.result.modules:
            self._quiet = True
            try:
                self.graph_a.value, self.graph_b.value = g.closest, g.graph_hash
            finally:
                self._quiet = False
            self._show_diff()

    def _show_diff(self) -> None:
        if self._quiet or self.result is None or not self.graph_a.value or not self.graph_b.value:
            return
        self.diff.show(views.graph_diff(self.result, self.graph_a.value, self.graph_b.value))

    def figures(self) -> list[Any]:
        """The current figures (plain ``go.Figure``), in page order."""
        if self.result is None:
            return []
        figs = [views.step_timeline(self.result), views.graphs_table(self.result)]
        if self.graph_a.value and self.graph_b.value:
            figs.append(views.graph_diff(self.result, self.graph_a.value, self.graph_b.value))
        return figs

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        """A static, self-contained fragment of the current figures (plotly.js inlined once)."""
        if self.result is None:
            return "<p>no XLA run yet</p>"
        divs = [figure_div(f, include_plotlyjs=(i == 0)) for i, f in enumerate(self.figures())]
        return "<div>" + views.run_html(self.result) + "".join(divs) + "</div>"

    def to_html(self, path: Optional[str] = None) -> str:
        """A full offline page of the current state; written to ``path`` when given."""
        label = self.result.label if self.result else self.scenario.value
        sections = (
            [views.run_html(self.result), *self.figures()]
            if self.result
            else ["<p>no XLA run yet</p>"]
        )
        text = page(f"XLA recompilation explorer: {label}", sections)
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text


__all__ = ["ERROR", "print_progress", "XlaExplorer"]
