"""The "every size" panel of the schedule explorer: prove the schedule over a range, then fix it.

"Check every size" sweeps the current schedule over the range in the box
(:func:`~explorer.analysis.sizes.check_sizes`) and draws the verdict map; clicking a cell asks
the app to load that size (with its first finding selected). "Search for a fix" tries the
rewrite rules over the same range (:func:`~explorer.analysis.repair.search_fixes`) and lists
the proven candidates, best first, and the rejected ones with what rejected them; choosing a
candidate asks the app to apply its rules, which redraws the grid with the moved
instructions marked. The sweep runs in the kernel, one size after another: keep the range to
a few thousand sizes here and use ``explorer check --sweep`` (every core) for more.
"""

from __future__ import annotations

import html
from typing import Callable, Sequence

import ipywidgets as w

from explorer.analysis.repair import FixSearch, search_fixes
from explorer.analysis.rules import Rule
from explorer.analysis.sizes import MakeSchedule, SizeSweep, check_sizes, parse_sizes
from explorer.views.sizes import VERDICTS, sizes_figure, verdict
from explorer.widgets.sync import LiveFigure

#: More sizes than this in the kernel would keep the page waiting for tens of seconds.
MAX_PANEL_SIZES = 5000


class SizesPanel:
    """Range box, two buttons, the verdict map and the candidate list (see the module docstring)."""

    def __init__(
        self,
        make: Callable[[], MakeSchedule],
        on_pick: Callable[[int, int], None],
        on_apply: Callable[[Sequence[Rule]], None],
        guard: Callable,
        default_range: str = "2-12:1-32",
    ) -> None:
        self._make, self._on_pick, self._on_apply = make, on_pick, on_apply
        self.sweep: SizeSweep | None = None
        self.search: FixSearch | None = None
        self.range = w.Text(
            value=default_range,
            description="sizes",
            style={"description_width": "4em"},
            layout=w.Layout(width="16em"),
            tooltip="STAGES:MICROBATCHES, e.g. 2-12:1-32 or 4,8:1-64",
        )
        self.check_button = w.Button(description="Check every size", icon="th")
        self.fix_button = w.Button(description="Search for a fix", icon="wrench")
        self.status = w.HTML()
        self.candidates = w.Select(
            options=[], rows=4, layout=w.Layout(width="100%", display="none")
        )
        # A Select cuts a long line at its right edge: the chosen candidate is said in full here.
        self.chosen = w.HTML()
        self.figure = LiveFigure()
        self.figure.widget.layout.display = "none"
        self.check_button.on_click(guard("checking every size", lambda _b: self.check()))
        self.fix_button.on_click(guard("searching for a fix", lambda _b: self.fix()))
        self.figure.on_click(guard("loading a size", self._clicked))
        self._on_choice = guard("applying a fix", self._chosen)
        self.candidates.observe(self._on_choice, names="value")
        self.widget = w.VBox(
            [
                w.HBox(
                    [self.range, self.check_button, self.fix_button],
                    layout=w.Layout(flex_flow="row wrap"),
                ),
                self.status,
                self.figure.widget,
                self.candidates,
                self.chosen,
            ],
            layout=w.Layout(width="100%"),
        )

    def _sizes(self) -> tuple[list[int], list[int]]:
        stages, mbs = parse_sizes(self.range.value)
        if len(stages) * len(mbs) > MAX_PANEL_SIZES:
            raise ValueError(
                f"{len(stages) * len(mbs):,} sizes is more than {MAX_PANEL_SIZES:,} for the page; "
                f"narrow the range or run: explorer check --sweep {self.range.value}"
            )
        return stages, mbs

    def check(self) -> SizeSweep:
        """Sweep the current schedule over the range and draw the verdict map."""
        stages, mbs = self._sizes()
        self.status.value = f"checking {len(stages) * len(mbs):,} sizes…"
        self.sweep = check_sizes(self._make(), stages, mbs, spec=self.range.value.replace(" ", ""))
        self.status.value = html.escape(self.sweep.describe()).replace("\n", "<br>")
        self.figure.show(sizes_figure(self.sweep))
        self.figure.widget.layout.display = None
        return self.sweep

    def fix(self) -> FixSearch:
        """Search rule combinations over the range; list the proven ones, best first."""
        stages, mbs = self._sizes()
        self.status.value = "searching: every combination of up to two rules, over every size…"
        self.search = result = search_fixes(
            self._make(), stages, mbs, spec=self.range.value.replace(" ", "")
        )
        self.sweep = result.baseline
        self.figure.show(sizes_figure(result.baseline))
        self.figure.widget.layout.display = None
        rejected = "; ".join(
            f"{' + '.join(c.names)} fails at {c.sweep.smallest_failing.stages}x"
            f"{c.sweep.smallest_failing.microbatches} ({VERDICTS[verdict(c.sweep.smallest_failing)]})"
            for c in result.rejected
            if c.sweep.smallest_failing
        )
        self.status.value = (
            f"{len(result.candidates)} proven fix(es) over {html.escape(result.baseline.spec)}; "
            f"choose one to apply it. Rejected: {html.escape(rejected) or 'none'}"
        )
        # only this handler: ``unobserve_all`` would also drop the observer that syncs ``index`` to the page
        self.candidates.unobserve(self._on_choice, names="value")
        self.candidates.options = [
            (
                f"{' + '.join(c.names)}: buffers at {result.reference[0]}x{result.reference[1]} "
                f"{','.join(map(str, c.buffers))}, makespan {c.makespan:g} ticks — "
                f"{'; '.join(r.description for r in c.rules)}",
                i,
            )
            for i, c in enumerate(result.candidates)
        ]
        self.candidates.value = None
        self.chosen.value = ""
        self.candidates.layout.display = None if result.candidates else "none"
        self.candidates.observe(self._on_choice, names="value")
        return result

    def _chosen(self, change: dict) -> None:
        if change["new"] is not None and self.search is not None:
            label = next(text for text, i in self.candidates.options if i == change["new"])
            self.chosen.value = f"<b>chosen:</b> {html.escape(label)}"
            self._on_apply(self.search.candidates[change["new"]].rules)

    def _clicked(self, points: list) -> None:
        hit = next((p for p in points if p.get("curve") == 0), None)
        if hit is not None and hit.get("x") is not None and hit.get("y") is not None:
            self._on_pick(int(hit["y"]), int(hit["x"]))


__all__ = ["MAX_PANEL_SIZES", "SizesPanel"]
