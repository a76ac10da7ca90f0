"""Figures kept compactly: every distinct piece of figure JSON once, however many states share it.

An explore block holds a figure per state (set-up x stages x micro-batches: hundreds), and
most of a plotly figure repeats from one state to the next: the template, the legend entries,
empty traces, often whole layouts. The store splits each figure into its template, its layout
and its traces, keeps each distinct piece once (by its JSON text) and describes the figure as
the indices of its pieces. The page puts a figure back together from those indices before
handing it to ``Plotly.react``; nothing in it is recomputed.
"""

from __future__ import annotations

import json
from typing import Any


def compact_json(value: Any) -> str:
    """JSON with no spaces and sorted keys: one text per value, so equal pieces are found equal."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, allow_nan=False)


class FigureStore:
    """Distinct pieces of figure JSON, and each figure as ``[layout, template, [traces]]`` indices."""

    def __init__(self) -> None:
        self.pieces: list[Any] = []
        self.figures: list[list[Any]] = []
        self._index: dict[str, int] = {}

    def piece(self, value: Any) -> int:
        """The index of ``value``, added when not seen before."""
        key = compact_json(value)
        found = self._index.get(key)
        if found is None:
            found = self._index[key] = len(self.pieces)
            self.pieces.append(value)
        return found

    def add(self, figure: Any) -> int:
        """Keep a ``go.Figure`` (or its dict); returns the figure's index."""
        as_dict = json.loads(figure.to_json()) if hasattr(figure, "to_json") else dict(figure)
        layout = dict(as_dict.get("layout") or {})
        template = layout.pop("template", None)
        entry = [
            self.piece(layout),
            self.piece(template) if template is not None else -1,
            [self.piece(trace) for trace in as_dict.get("data") or []],
        ]
        self.figures.append(entry)
        return len(self.figures) - 1

    def to_dict(self) -> dict[str, Any]:
        return {"pieces": self.pieces, "figures": self.figures}


def rebuild(store: dict[str, Any], index: int) -> dict[str, Any]:
    """Figure ``index`` as plotly JSON again (what the page script does; used by the tests)."""
    layout_i, template_i, traces = store["figures"][index]
    layout = dict(store["pieces"][layout_i])
    if template_i >= 0:
        layout["template"] = store["pieces"][template_i]
    return {"data": [store["pieces"][i] for i in traces], "layout": layout}


__all__ = ["FigureStore", "compact_json", "rebuild"]
