"""``PlotView``: one plotly figure on the page, drawn by plotly.js from the JSON the kernel sends.

Why not ``go.FigureWidget``: inside an ipywidgets box it draws at plotly's 700 px fallback
width and never follows the output area; every change it echoes back from the page is merged
into the kernel's copy (a numpy array where plotly expects a scalar raised ``ValueError`` in
``_remove_overlapping_props``, visible only in the Log Console, and left the two copies out
of step); tables updated in place opened blank. Here the kernel owns the figure: each change
sends the whole figure once, as compact JSON (numpy arrays travel as typed arrays), and the
page calls ``Plotly.react``. The page sends back only plain numbers: the axis ranges a user
zoomed to (for level of detail), the points clicked, and any drawing error in words.

plotly.js comes from the kernel, sent once per page on request, so the widget works offline and
matches the Python package's version: the small bundle (:mod:`explorer.ui.plotly_bundle`, a
quarter of the parse) while every figure on the page draws only the trace types it holds, the
installed package's full bundle once a figure needs another (``scattergl`` past a view's WebGL
switch-over). Parsing plotly.js is most of the time a fresh page takes to show its first view,
so an explorer first calls :func:`warm_page`, and the page parses the small bundle while the
kernel builds the figures.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Optional

import anywidget
import plotly
import traitlets

from explorer.ui.plotly_bundle import SMALL_TRACES, small_bundle_for

_PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"


def _bundled_version() -> str:
    """The version in plotly.min.js's header (``* plotly.js v4.1.1``), so the page can reuse an
    identical copy it already has."""
    with open(_PLOTLY_JS, "rb") as f:
        head = f.read(256).decode("ascii", "replace")
    found = re.search(r"plotly\.js v(\d+\.\d+\.\d+)", head)
    return found.group(1) if found else ""


_VERSION = _bundled_version()
#: The trace types the page may draw with the small bundle: none when it is not this version.
_SMALL_TYPES = sorted(SMALL_TRACES) if small_bundle_for(_VERSION) is not None else []

#: ``(x_range, y_range)``, each ``(lo, hi)``, ``"auto"`` (reset) or None (unchanged).
ZoomHandler = Callable[[object, object], None]
#: ``[{"curve": trace index, "index": point index, "x": ..., "y": ..., "name": trace name}]``
ClickHandler = Callable[[list], None]


class PlotView(anywidget.AnyWidget):
    """A figure that fills its output width; ``spec`` is the figure's plotly JSON."""

    _esm = Path(__file__).with_name("plot_view.js")
    spec = traitlets.Bytes(b"").tag(sync=True)
    revision = traitlets.Int(0).tag(sync=True)
    plotly_version = traitlets.Unicode(_VERSION).tag(sync=True)
    small_types = traitlets.List(traitlets.Unicode(), _SMALL_TYPES).tag(sync=True)

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.drawn_revision = -1
        self.errors: list[str] = []
        self._on_zoom: list[ZoomHandler] = []
        self._on_click: list[ClickHandler] = []
        self._on_error: list[Callable[[str], None]] = []
        self.on_msg(self._message)

    def set_json(self, payload: bytes) -> None:
        """Show the figure whose plotly JSON is ``payload``."""
        with self.hold_sync():
            self.spec = payload
            self.revision += 1

    def on_zoom(self, handler: ZoomHandler) -> None:
        """Call ``handler(x_range, y_range)`` when the user zooms, pans or resets the axes."""
        self._on_zoom.append(handler)

    def on_click(self, handler: ClickHandler) -> None:
        """Call ``handler(points)`` when the user clicks points of the figure."""
        self._on_click.append(handler)

    def on_error(self, handler: Callable[[str], None]) -> None:
        """Call ``handler(message)`` when the page fails to draw (so an app can say it)."""
        self._on_error.append(handler)

    def _message(self, _widget: object, content: dict, buffers: list) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == "plotly?":
            self._send_plotly(content.get("bundle"))
        elif kind == "drawn":
            self.drawn_revision = int(content.get("revision", -1))
        elif kind == "relayout":
            for handler in self._on_zoom:
                handler(_range(content.get("x")), _range(content.get("y")))
        elif kind == "click":
            points = content.get("points") or []
            for handler in self._on_click:
                handler(points)
        elif kind == "error":
            message = f"the page could not finish {content.get('where', 'drawing')}: {content.get('message', '')}"
            self.errors.append(message)
            for handler in self._on_error:
                handler(message)

    def _send_plotly(self, asked: object) -> None:
        """Answer the page's request with the bundle it asked for (the full one when the small
        one is not this version), naming which one it is."""
        small = small_bundle_for(_VERSION) if asked == "small" else None
        if small is not None:
            self.send({"type": "plotly", "bundle": "small"}, [small])
        else:
            self.send({"type": "plotly", "bundle": "full"}, [_PLOTLY_JS.read_bytes()])


class PlotlyPreload(anywidget.AnyWidget):
    """Never displayed: a model whose state is plotly.js, which the page runs when the model is
    created (``initialize`` in ``plot_view.js``; see :func:`warm_page`)."""

    _esm = Path(__file__).with_name("plot_view.js")
    preload = traitlets.Bytes(b"").tag(sync=True)
    plotly_version = traitlets.Unicode(_VERSION).tag(sync=True)


_WARM: list[PlotlyPreload] = []


def warm_page() -> None:
    """Have the page parse the small plotly.js bundle now, while the kernel still computes.

    An explorer calls this first: it opens one model (never displayed) whose state carries the
    bundle, and the page starts parsing it the moment the model exists (``initialize`` in
    ``plot_view.js``), instead of asking for it once the first view is displayed, after the
    explorer's figures are built. Once per kernel: a page that reloads gets the model back
    with its state, and a view that finds no copy still asks for one.
    """
    small = small_bundle_for(_VERSION)
    if not _WARM and small is not None:
        _WARM.append(PlotlyPreload(preload=small))


def _range(value: object) -> Optional[object]:
    """A plain ``(lo, hi)`` pair, ``"auto"``, or None for anything else the page might send."""
    if value == "auto":
        return "auto"
    if isinstance(value, (list, tuple)) and len(value) == 2:
        try:
            lo, hi = float(value[0]), float(value[1])
        except (TypeError, ValueError):
            return None
        if lo == lo and hi == hi and abs(lo) != float("inf") and abs(hi) != float("inf"):
            return (min(lo, hi), max(lo, hi))
    return None


__all__ = ["ZoomHandler", "ClickHandler", "PlotView", "PlotlyPreload", "warm_page"]
