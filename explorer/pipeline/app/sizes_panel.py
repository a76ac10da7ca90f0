"""The "every size" panel of the schedule explorer: prove the schedule over a range, then fix it.

"Check every size" sweeps the current schedule over the range in the box
(:func:`~explorer.pipeline.analysis.sizes.check_sizes`) and draws the verdict map; clicking a cell asks
the app to load that size (with its first finding selected). "Search for a fix" tries the
rewrite rules over the same range (:func:`~explorer.pipeline.analysis.repair.search_fixes`) and lists
the proven candidates, best first, and the rejected ones with what rejected them; choosing a
candidate asks the app to apply its rules, which redraws the grid with the moved
instructions marked. The sweep runs in the kernel, one size after another: keep the range to
a few thousand sizes here and use ``explorer check --sweep`` (every core) for more.

The map and the candidates describe the settings they were computed for, and say which.
When the schedule above changes in a way that changes verdicts (kind, chunks, buffers,
order, rules; not the size, which the map already spans), :meth:`SizesPanel.follow` fades
the map and says which earlier settings it describes, and drops candidates that no longer
apply: a red map under a clean schedule read as "today's DeepSpeed still fails". A chosen
candidate's own sweep (the proof that made it a candidate) becomes the map, so the map
follows the fix it proved.
"""

from __future__ import annotations

import html
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import ipywidgets as w

from explorer.pipeline.analysis.repair import FixSearch, search_fixes
from explorer.pipeline.analysis.sizes import MakeSchedule, SizeSweep, check_sizes, parse_sizes
from explorer.pipeline.views.sizes import VERDICTS, sizes_figure, verdict
from explorer.ui.sync import LiveFigure

if TYPE_CHECKING:  # the panel only reads the settings it is given
    from explorer.pipeline.app.controls import ScheduleSettings

#: More sizes than this in the kernel would keep the page waiting for tens of seconds.
MAX_PANEL_SIZES = 5000


class SizesPanel:
    """Range box, two buttons, the verdict map and the candidate list (see the module docstring)."""

    def __init__(
        self,
        make: Callable[[], MakeSchedule],
        on_pick: Callable[[int, int], None],
        on_apply: Callable[[Sequence[str]], None],
        guard: Callable,
        default_range: str = "2-12:1-32",
        current: Optional[Callable[[], "ScheduleSettings"]] = None,
    ) -> None:
        self._make, self._on_pick, self._on_apply = make, on_pick, on_apply
        #: The settings of the schedule on screen; it raises (an ``InputError`` the guard says)
        #: where nothing on screen can be swept, before any sweep starts.
        self._current = current
        self.sweep: SizeSweep | None = None
        self.search: FixSearch | None = None
        #: The settings the map describes, and those the candidates were searched from.
        self.described: Optional["ScheduleSettings"] = None
        self.searched: Optional["ScheduleSettings"] = None
        #: Why the map no longer describes the schedule above ("": it does).
        self.stale = ""
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

    def _settings(self) -> Optional["ScheduleSettings"]:
        return self._current() if self._current is not None else None

    def _words(self) -> str:
        return self.described.describe() if self.described is not None else "this schedule"

    def _draw(self, sweep: SizeSweep) -> None:
        """The map of ``sweep`` (``self.sweep``), titled with the settings it describes (faded when stale)."""
        self.figure.show(sizes_figure(sweep, f"Every size of {self._words()}", stale=self.stale))
        self.figure.widget.layout.display = None

    def _say_sweep(self, sweep: SizeSweep) -> None:
        said = html.escape(f"{self._words()}: {sweep.describe()}").replace("\n", "<br>")
        if self.stale:
            said = (
                f"<span style='color:#b00020'>⚠ {html.escape(self.stale)}</span><br>"
                f"<span style='color:#888'>{said}</span>"
            )
        self.status.value = said

    def check(self) -> SizeSweep:
        """Sweep the current schedule over the range and draw the verdict map."""
        settings = self._settings()  # first: the app refuses when nothing on screen can be swept
        stages, mbs = self._sizes()
        self.status.value = f"checking {len(stages) * len(mbs):,} sizes…"
        self.sweep = check_sizes(self._make(), stages, mbs, spec=self.range.value.replace(" ", ""))
        self.described, self.stale = settings, ""
        self._say_sweep(self.sweep)
        self._draw(self.sweep)
        return self.sweep

    def follow(self, settings: Optional["ScheduleSettings"]) -> None:
        """The schedule above is now ``settings`` (None: one given from code, no settings):
        mark the map when it describes other settings, unmark it when they are back, and drop
        candidates searched from other settings."""
        restored = False
        if self.search is not None and self.searched is not None:
            chosen = self.candidates.value
            fixed = (
                replace(
                    self.searched,
                    rules=tuple(self.searched.rules) + tuple(self.search.candidates[chosen].names),
                )
                if chosen is not None
                else None
            )
            same = settings is not None and settings.shape() == self.searched.shape()
            if same:  # back to the settings searched from (the rules removed): their own map
                self._choose(None)
                restored = self.sweep is not self.search.baseline
                self.sweep, self.described = self.search.baseline, self.searched
            elif not same and (
                fixed is None or settings is None or settings.shape() != fixed.shape()
            ):
                self._drop_candidates()
        if self.sweep is None or self.described is None:
            return
        if settings is not None and settings.shape() == self.described.shape():
            stale = ""
        else:
            now = settings.describe() if settings is not None else "a schedule given from code"
            stale = (
                f"This map describes {self.described.describe()}, not the schedule above "
                f"({now}): press Check every size to prove that one."
            )
        if stale != self.stale or restored:
            self.stale = stale
            self._say_sweep(self.sweep)
            self._draw(self.sweep)

    def _choose(self, index: Optional[int]) -> None:
        """Set the candidate list's choice from code (no apply) and the chosen line with it."""
        self.candidates.unobserve(self._on_choice, names="value")
        self.candidates.value = index
        self.candidates.observe(self._on_choice, names="value")
        if index is None:
            self.chosen.value = ""

    def _drop_candidates(self) -> None:
        self._choose(None)
        self.candidates.unobserve(self._on_choice, names="value")
        self.candidates.options = []
        self.candidates.observe(self._on_choice, names="value")
        self.candidates.layout.display = "none"
        self.search = self.searched = None

    def fix(self) -> FixSearch:
        """Search rule combinations over the range; list the proven ones, best first."""
        settings = self._settings()  # first: the app refuses when nothing on screen can be swept
        stages, mbs = self._sizes()
        self.status.value = "searching: every combination of up to two rules, over every size…"
        self.search = result = search_fixes(
            self._make(), stages, mbs, spec=self.range.value.replace(" ", "")
        )
        self.sweep = result.baseline
        self.searched = self.described = settings
        self.stale = ""
        self._draw(self.sweep)
        rejected = "; ".join(
            f"{' + '.join(c.names)} fails at {c.sweep.smallest_failing.stages}x"
            f"{c.sweep.smallest_failing.microbatches} ({VERDICTS[verdict(c.sweep.smallest_failing)]})"
            for c in result.rejected
            if c.sweep.smallest_failing
        )
        self.status.value = (
            f"{html.escape(self._words())}: {len(result.candidates)} proven fix(es) over "
            f"{html.escape(result.baseline.spec)}; choose one to apply it (it replaces the one "
            f"chosen before). Rejected: {html.escape(rejected) or 'none'}"
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
        """Apply the chosen candidate on top of the settings it was searched from (replacing an
        earlier choice), and show its proof as the map."""
        if change["new"] is None or self.search is None:
            return
        candidate = self.search.candidates[change["new"]]
        label = next(text for text, i in self.candidates.options if i == change["new"])
        self.chosen.value = f"<b>chosen:</b> {html.escape(label)}"
        rules = (self.searched.rules if self.searched else ()) + tuple(candidate.names)
        self.sweep, self.stale = candidate.sweep, ""
        self.described = replace(self.searched, rules=rules) if self.searched else None
        self._say_sweep(self.sweep)
        self._draw(self.sweep)
        self._on_apply(rules)

    def _clicked(self, points: list) -> None:
        hit = next((p for p in points if p.get("curve") == 0), None)
        if hit is not None and hit.get("x") is not None and hit.get("y") is not None:
            self._on_pick(int(hit["y"]), int(hit["x"]))


__all__ = ["MAX_PANEL_SIZES", "SizesPanel"]
