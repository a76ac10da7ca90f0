"""The findings panel: every hazard, unmatched exchange and deadlock, in words, clickable.

Selecting a line calls back with the finding so the app can outline its cell on the grid,
zoom to it and switch the lifetimes view to its stage. A ``Select`` sends nothing when the
line already selected is clicked again, so once a user zoomed away from a finding a click could
not bring them back: "zoom to it again", beside the selected finding, does. A broken 64-stage schedule has tens of
thousands of findings: they are listed a page at a time, with buttons to page through all of
them, so none is out of reach.
"""

from __future__ import annotations

import html
from typing import Callable, Sequence

import ipywidgets as w

from explorer.pipeline.views.palette import HAZARD


class FindingsPanel:
    """A header line, a ``Select`` of one page of findings and paging buttons; ``on_select(finding)`` fires on a click."""

    def __init__(self, on_select: Callable[[object], None], limit: int = 200) -> None:
        self._on_select = on_select
        self.limit = limit
        self.page = 0
        self.findings: list = []
        self.header = w.HTML()
        self.list = w.Select(options=[], rows=6, layout=w.Layout(width="100%"))
        # A Select cuts a long line at its right edge: the selected finding is said in full here.
        self.detail = w.HTML()
        self.again = w.Button(
            description="zoom to it again",
            icon="search",
            tooltip="outline the selected finding and zoom the grid back to it",
            layout=w.Layout(width="12em", display="none"),
        )
        self.again.on_click(lambda _b: self._show_again())
        self.previous = w.Button(
            description="previous", icon="chevron-left", layout=w.Layout(width="8em")
        )
        self.next = w.Button(description="next", icon="chevron-right", layout=w.Layout(width="8em"))
        self.position = w.Label()
        self.previous.on_click(lambda _b: self.show_page(self.page - 1))
        self.next.on_click(lambda _b: self.show_page(self.page + 1))
        self.pager = w.HBox([self.previous, self.next, self.position])
        self.list.observe(self._changed, names="value")
        self.widget = w.VBox(
            [
                self.header,
                self.list,
                w.HBox(
                    [self.detail, self.again],
                    layout=w.Layout(align_items="center", flex_flow="row wrap"),
                ),
                self.pager,
            ],
            layout=w.Layout(width="100%"),
        )

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.findings) // self.limit))

    def show(self, findings: Sequence[object]) -> None:
        """Replace the list with ``findings`` (records with ``describe()``), on its first page."""
        self.findings = list(findings)
        n = len(self.findings)
        colour = HAZARD if n else "#2a7a2a"
        text = (
            f"{n:,} finding{'s' if n != 1 else ''}: click one to outline it on the grid and zoom to it"
            if n
            else "no findings: every buffer read sees its own micro-batch, every send meets its receive"
        )
        self.header.value = f"<b style='color:{colour}'>{text}</b>"
        self.show_page(0)

    def show_page(self, page: int) -> None:
        """List page ``page`` (clamped to the pages there are)."""
        self.page = min(max(0, page), self.pages - 1)
        a = self.page * self.limit
        shown = self.findings[a : a + self.limit]
        self.list.unobserve(self._changed, names="value")
        self.list.options = [(f"{a + i + 1}. {f.describe()}", a + i) for i, f in enumerate(shown)]
        self.list.value = None
        self.detail.value = ""
        self.again.layout.display = "none"
        self.list.rows = max(1, min(6, len(shown)))
        self.list.layout.display = None if shown else "none"
        self.list.observe(self._changed, names="value")
        many = len(self.findings) > self.limit
        self.pager.layout.display = None if many else "none"
        self.previous.disabled = self.page == 0
        self.next.disabled = self.page >= self.pages - 1
        self.position.value = (
            f"findings {a + 1:,}–{a + len(shown):,} of {len(self.findings):,}" if shown else ""
        )

    def select(self, index: int) -> None:
        """Select finding ``index`` (of all findings) as if clicked, turning to its page."""
        if not 0 <= index < len(self.findings):
            raise IndexError(f"finding {index} does not exist: there are {len(self.findings)}")
        if index // self.limit != self.page:
            self.show_page(index // self.limit)
        self.list.value = index

    def say_selected(self, why: str) -> None:
        """Say why the selected finding was selected for the user (e.g. a failed run ran into it)."""
        index = self.list.value
        if index is not None:
            self.detail.value = (
                f"<b>selected:</b> {html.escape(why)}: {index + 1}. "
                f"{html.escape(self.findings[index].describe())}"
            )

    def _show_again(self) -> None:
        if self.list.value is not None:
            self._on_select(self.findings[self.list.value])

    def _changed(self, change: dict) -> None:
        if change["new"] is not None:
            finding = self.findings[change["new"]]
            self.detail.value = (
                f"<b>selected:</b> {change['new'] + 1}. {html.escape(finding.describe())}"
            )
            self.again.layout.display = None
            self._on_select(self.findings[change["new"]])


__all__ = ["FindingsPanel"]
