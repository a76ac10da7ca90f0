"""``FoldedJob(folder)``: a job of thousands of ranks in one screen, each outlier rank a click away.

The job's folder (replicas of one pipeline, ``explorer run`` or ``explorer.instrument`` rank
files) is read into columns and folded by stage (:mod:`explorer.pipeline.analysis.fold_lanes`):
one lane per stage holding each instruction's median over the replicas and their spread, the
outlier ranks as marks, the slowest replica's critical path as a line through the cells it
visits. Clicking a mark shows that rank's own lane under the folded view, above
its stage's medians; ``show_rank(rank)`` does the same from code. The page receives only the
folded cells, so 8,192 ranks draw as fast as one replica.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional, Union

import ipywidgets as w

from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold import Fold, fold
from explorer.pipeline.analysis.fold_lanes import lanes, rank_lane
from explorer.pipeline.analysis.fold_path import folded_path
from explorer.pipeline.traces.job import JobTrace, read_job
from explorer.pipeline.views.folded import OUTLIERS, folded_figure, rank_lane_figure
from explorer.ui.plot_view import warm_page
from explorer.ui.sync import LiveFigure


class FoldedJob:
    """The folded view of a job (``job``: its folder, or a :class:`JobTrace` already read)."""

    def __init__(self, job: Union[str, Path, JobTrace]) -> None:
        warm_page()  # the page parses plotly.js while the job is read and folded
        self.job = job if isinstance(job, JobTrace) else read_job(Path(job))
        self.fold: Fold = fold(self.job)
        self.lanes = lanes(self.job)
        self.path = folded_path(self.job, clocks(self.job))
        layout = self.job.layout
        self.folded = LiveFigure(
            folded_figure(self.lanes, self.fold.outliers, layout.replicas, layout.ranks, self.path)
        )
        self.lane = LiveFigure()
        self.selected: Optional[int] = None
        self.summary = w.HTML(self._summary())
        self.lane_title = w.HTML("<i>click an outlier's mark to open that rank's own lane</i>")
        self.folded.on_click(self._clicked)
        self.widget = w.VBox([self.summary, self.folded.widget, self.lane_title, self.lane.widget])

    def show_rank(self, rank: int) -> None:
        """Open ``rank``'s own lane under the folded view."""
        if not 0 <= rank < self.job.layout.ranks:
            raise ValueError(
                f"rank {rank} is not a rank of this job (0 to {self.job.layout.ranks - 1})"
            )
        self.selected = rank
        self.lane.show(rank_lane_figure(rank_lane(self.job, rank), self.lanes))
        said = next((o.sentence() for o in self.fold.outliers if o.rank == rank), "")
        self.lane_title.value = f"<b>rank {rank}</b>" + (f": {html.escape(said)}" if said else "")

    def _clicked(self, points: list) -> None:
        for point in points:
            if point.get("name") == OUTLIERS and isinstance(point.get("index"), int):
                index = point["index"]
                if 0 <= index < len(self.fold.outliers):
                    self.show_rank(self.fold.outliers[index].rank)
                    return

    def _summary(self) -> str:
        named = [html.escape(o.sentence()) for o in self.fold.outliers]
        listed = "".join(f"<li>{s}</li>" for s in named) or "<li>no outlier rank</li>"
        ended = sum(u.ended for u in self.job.unread)
        unread = (
            f"<br>could not read: {len(self.job.unread) - ended} rank file(s)"
            if len(self.job.unread) > ended
            else ""
        ) + (f"<br>did not run to its end: {ended} rank(s)" if ended else "")
        path = (
            "<br>".join(
                html.escape(line.strip())
                for line in self.path.sentences(tuple(o.rank for o in self.fold.outliers))
            )
            if self.path is not None
            else ""
        )
        return f"<b>{self.job.layout.ranks:,} ranks</b>, outliers:<ul>{listed}</ul>{path}{unread}"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)


__all__ = ["FoldedJob"]
