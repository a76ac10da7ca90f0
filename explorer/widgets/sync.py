"""A live ``go.FigureWidget`` that follows freshly built ``go.Figure`` objects.

Views build plain figures (pure, testable); the app keeps one :class:`LiveFigure` per view on
the page and hands it each new figure. When the trace structure is unchanged (the common case:
a slider moved) every trace and the layout are updated in place inside one
``batch_update()``, so the browser receives a single update message instead of a teardown and
rebuild. When it changed (e.g. bars switched to WebGL) the traces are replaced.

Properties the new figure no longer sets (a note that went away, cell text dropped on a large
grid) must be cleared, so the keys set last time are remembered here; reading them back from
the widget would deep-copy its whole state, template included, on every slider move.
"""

from __future__ import annotations

import plotly.graph_objects as go

_SKIP = ("type", "uid")


class LiveFigure:
    """``widget`` shows the last figure given to :meth:`show`."""

    def __init__(self, figure: go.Figure) -> None:
        self.widget = go.FigureWidget(figure)
        self._layout_keys, self._trace_keys = self._plain(figure)[0].keys(), []
        self._trace_keys = [set(p) for p in self._plain(figure)[1]]

    @staticmethod
    def _plain(figure: go.Figure) -> tuple[dict, list[dict]]:
        layout = figure.layout.to_plotly_json()
        layout.pop("template", None)  # every view uses the default template: keep the widget's
        traces = [t.to_plotly_json() for t in figure.data]
        for props in traces:
            for key in _SKIP:
                props.pop(key, None)
        return layout, traces

    def show(self, figure: go.Figure) -> None:
        """Make the widget show ``figure``."""
        target = self.widget
        layout, traces = self._plain(figure)
        for key in set(self._layout_keys) - set(layout):
            layout[key] = None
        same = len(target.data) == len(figure.data) and all(type(a) is type(b) for a, b in zip(target.data, figure.data))
        with target.batch_update():
            if same:
                for i, (old, props) in enumerate(zip(target.data, traces)):
                    for key in (self._trace_keys[i] if i < len(self._trace_keys) else set()) - set(props):
                        props[key] = None
                    old.update(props, overwrite=True)
            else:
                target.data = ()
                target.add_traces(list(figure.data))
            target.layout.update(layout, overwrite=True)
        self._layout_keys = {k for k, v in layout.items() if v is not None}
        self._trace_keys = [set(p) for p in traces]
