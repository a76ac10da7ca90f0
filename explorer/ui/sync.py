"""A live figure on the page that follows freshly built ``go.Figure`` objects.

Views build plain figures (pure, testable); an app keeps one :class:`LiveFigure` per view and
hands it each new figure. The figure is serialised once with plotly's own encoder (numpy
arrays become typed arrays) and sent to a :class:`~explorer.ui.plot_view.PlotView`,
which redraws with ``Plotly.react``. ``figure`` is always what the page was last sent, so
tests and apps read the kernel's copy without a round trip, and ``last_bytes`` is the size
of that message (the views cap it; the browser benchmark checks it).
"""

from __future__ import annotations

from typing import Callable, Optional

import plotly.graph_objects as go

from explorer.ui.plot_view import ClickHandler, PlotView, ZoomHandler


class LiveFigure:
    """``widget`` shows the last figure given to :meth:`show`; ``figure`` is that figure."""

    def __init__(self, figure: Optional[go.Figure] = None) -> None:
        self.widget = PlotView()
        self.figure = go.Figure()
        self.last_bytes = 0
        self.show(figure if figure is not None else go.Figure())

    def show(self, figure: go.Figure) -> None:
        """Make the page show ``figure``."""
        payload = figure.to_json().encode()
        self.figure = figure
        self.last_bytes = len(payload)
        self.widget.set_json(payload)

    def on_zoom(self, handler: ZoomHandler) -> None:
        """See :meth:`PlotView.on_zoom`."""
        self.widget.on_zoom(handler)

    def on_click(self, handler: ClickHandler) -> None:
        """See :meth:`PlotView.on_click`."""
        self.widget.on_click(handler)

    def on_error(self, handler: Callable[[str], None]) -> None:
        """See :meth:`PlotView.on_error`."""
        self.widget.on_error(handler)


__all__ = ["LiveFigure"]
