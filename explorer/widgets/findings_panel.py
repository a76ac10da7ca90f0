"""The findings panel: every hazard, unmatched exchange and deadlock, in words, clickable.

Selecting a line calls back with the finding so the app can outline its cell on the grid and
switch the lifetimes view to its stage. Long lists (a broken 64-stage schedule has tens of
thousands of hazards) show the first ``limit`` and say how many more there are.
"""

from __future__ import annotations

from typing import Callable, Sequence

import ipywidgets as w

from explorer.views.palette import HAZARD


class FindingsPanel:
    """A header line and a ``Select`` of findings; ``on_select(finding)`` fires on a click."""

    def __init__(self, on_select: Callable[[object], None], limit: int = 200) -> None:
        self._on_select = on_select
        self.limit = limit
        self.findings: list = []
        self.header = w.HTML()
        self.list = w.Select(options=[], rows=6, layout=w.Layout(width="100%"))
        self.list.observe(self._changed, names="value")
        self.widget = w.VBox([self.header, self.list], layout=w.Layout(width="100%"))

    def show(self, findings: Sequence[object]) -> None:
        """Replace the list with ``findings`` (records with ``describe()``)."""
        self.findings = list(findings)
        shown = self.findings[: self.limit]
        n = len(self.findings)
        more = f" (first {self.limit} listed)" if n > self.limit else ""
        colour = HAZARD if n else "#2a7a2a"
        text = f"{n} finding{'s' if n != 1 else ''}{more}: click one to outline it on the grid" if n else "no findings: every buffer read sees its own micro-batch, every send meets its receive"
        self.header.value = f"<b style='color:{colour}'>{text}</b>"
        self.list.unobserve(self._changed, names="value")
        self.list.options = [(f.describe(), i) for i, f in enumerate(shown)]
        self.list.value = None
        self.list.rows = max(1, min(6, len(shown)))
        self.list.layout.display = None if shown else "none"
        self.list.observe(self._changed, names="value")

    def select(self, index: int) -> None:
        """Select finding ``index`` as if clicked."""
        self.list.value = index

    def _changed(self, change: dict) -> None:
        if change["new"] is not None:
            self._on_select(self.findings[change["new"]])
