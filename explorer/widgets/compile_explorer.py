"""``CompileExplorer``: pick a scenario, a backend and a number of iterations; see what compiled.

The widget only wires controls to pure code: :func:`run_scenario` produces the records,
:mod:`explorer.views.compile` turns them into figures, and the callback copies those
figures into ``FigureWidget`` instances inside ``batch_update()``. The same figures make the
static fallback (``_repr_html_``) for notebooks rendered where no kernel runs.
"""

from __future__ import annotations

from typing import Any, Optional

from explorer.errors import require
from explorer.runtime.compile.config import default_backend
from explorer.runtime.compile.records import ProbeResult
from explorer.runtime.compile.run import run_scenario
from explorer.runtime.compile.scenarios import PRESETS
from explorer.views import compile as views
from explorer.views.html import figure_div, page

BACKENDS = ("inductor", "aot_eager", "eager")


def _copy_into(widget: Any, fig: Any) -> None:
    """Replace a FigureWidget's traces and layout with those of ``fig``, in one batched update."""
    widget.data = ()
    with widget.batch_update():
        widget.add_traces(list(fig.data))
        widget.layout = fig.layout


class CompileExplorer:
    """Scenario, backend and iterations in; time plot, compile table, guard table and diagnosis out."""

    def __init__(self, scenario: str = "cycling", backend: Optional[str] = None, iterations: Optional[int] = None,
                 result: Optional[ProbeResult] = None) -> None:
        widgets = require("ipywidgets", "lab", "The compile explorer")
        go = require("plotly.graph_objects", "lab", "The compile explorer")
        self.scenario = widgets.Dropdown(options=list(PRESETS), value=scenario, description="scenario")
        backends = list(dict.fromkeys([backend or default_backend(), *BACKENDS]))
        self.backend = widgets.Dropdown(options=backends, value=backends[0], description="backend")
        self.iterations = widgets.IntSlider(value=iterations or PRESETS[scenario].iterations, min=3, max=60,
                                            description="iterations")
        self.run_button = widgets.Button(description="Run probe", button_style="primary")
        self.summary = widgets.HTML()
        self.time_fig = go.FigureWidget()
        self.compile_fig = go.FigureWidget()
        self.guard_fig = go.FigureWidget()
        self.run_button.on_click(lambda _b: self.run())
        self.scenario.observe(self._on_scenario, names="value")
        controls = widgets.HBox([self.scenario, self.backend, self.iterations, self.run_button])
        self.widget = widgets.VBox([controls, self.summary, self.time_fig, self.compile_fig, self.guard_fig])
        self.result: Optional[ProbeResult] = None
        if result is not None:
            self.show(result)
        else:
            self.run()

    def _on_scenario(self, change: dict[str, Any]) -> None:
        self.iterations.value = PRESETS[change["new"]].iterations

    def run(self) -> ProbeResult:
        """Probe the selected scenario and show it."""
        self.summary.value = f"<p>running {self.scenario.value} ...</p>"
        result = run_scenario(self.scenario.value, self.iterations.value, self.backend.value)
        self.show(result)
        return result

    def figures(self) -> list[Any]:
        """The current figures (plain ``go.Figure``), in page order."""
        if self.result is None:
            return []
        return [views.iteration_figure(self.result), views.compile_table(self.result), views.guards_table(self.result)]

    def show(self, result: ProbeResult) -> None:
        """Display ``result``: copy its figures into the live widgets."""
        self.result = result
        self.summary.value = views.diagnosis_html(result)
        for widget, fig in zip((self.time_fig, self.compile_fig, self.guard_fig), self.figures()):
            _copy_into(widget, fig)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    def _repr_html_(self) -> str:
        """A static, self-contained fragment of the current figures (plotly.js inlined once)."""
        if self.result is None:
            return "<p>no probe run yet</p>"
        figs = self.figures()
        divs = [figure_div(f, include_plotlyjs=(i == 0)) for i, f in enumerate(figs)]
        return "<div>" + views.diagnosis_html(self.result) + "".join(divs) + "</div>"

    def to_html(self, path: Optional[str] = None) -> str:
        """A full offline page of the current state; written to ``path`` when given."""
        label = self.result.label if self.result else self.scenario.value
        text = page(f"torch.compile probe: {label}", [views.diagnosis_html(self.result)] + self.figures()
                    if self.result else ["<p>no probe run yet</p>"])
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        return text
