"""The page of ``explorer read JOB_DIR --html``: the folded job, and each outlier rank's own lane.

The page holds one lane per stage whatever the rank count (a job of 8,192 ranks opens as fast
as one replica's) and, hidden below it, the lane of every named outlier rank: a click on an
outlier's mark shows that rank's lane and scrolls to it. No network, no kernel: plotly.js is
inlined once.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Optional

from explorer.pipeline.analysis.fold import Fold
from explorer.pipeline.analysis.fold_path import FoldedPath
from explorer.pipeline.analysis.step_cost import StepCosts
from explorer.pipeline.traces.job import JobTrace

#: Shows the clicked outlier's lane (the folded figure is the page's first plot).
_CLICK = """
<script>
(function () {
  var plot = document.querySelectorAll('.plotly-graph-div')[0];
  plot.on('plotly_click', function (event) {
    var point = event.points[0];
    if (!point || point.customdata === undefined) { return; }
    var lane = document.getElementById('lane-' + point.customdata);
    if (!lane) { return; }
    lane.style.display = 'block';
    var inner = lane.querySelector('.plotly-graph-div');
    if (inner && window.Plotly) { Plotly.Plots.resize(inner); }
    lane.scrollIntoView();
  });
})();
</script>
"""


def write_html(
    job: JobTrace,
    folded: Fold,
    path: str,
    costs: Optional[StepCosts] = None,
    critical: Optional[FoldedPath] = None,
) -> Path:
    """Write the folded job's page to ``path`` (with each outlier's cost to the step and the
    slowest replica's critical path, when known)."""
    from explorer import inputs
    from explorer.pipeline.analysis.fold_lanes import lanes, rank_lane
    from explorer.pipeline.views.folded import folded_figure, rank_lane_figure
    from explorer.ui.html import figure_div, page

    cells = lanes(job)
    layout = job.layout
    sections: list = [
        folded_figure(cells, folded.outliers, layout.replicas, layout.ranks, critical),
        f"<p>{html.escape(folded.rule.sentence())}.</p>",
    ]
    if folded.outliers:
        items = "".join(f"<li>{html.escape(o.sentence())}</li>" for o in folded.outliers)
        sections.append(f"<h2>Outlier ranks</h2><ul>{items}</ul>")
    said = (costs.sentences() if costs is not None else []) + (
        critical.sentences(tuple(o.rank for o in folded.outliers)) if critical is not None else []
    )
    if said:
        sections.append(f"<p>{'<br>'.join(html.escape(line.strip()) for line in said)}</p>")
    lanes_drawn = [
        (rank, rank_lane_figure(rank_lane(job, rank), cells))
        for rank in sorted({o.rank for o in folded.outliers})
    ]
    for rank, fig in lanes_drawn:
        div = figure_div(fig)
        sections.append(f"<div id='lane-{rank}' class='lane' style='display:none'>{div}</div>")
    sections.append(_CLICK)
    title = f"Pipeline job, folded: {job.layout.ranks:,} ranks"
    doc = page(title, sections, extra_figures=[fig for _, fig in lanes_drawn])
    inputs.write_text(path, doc, "HTML report")
    return Path(path)


__all__ = ["write_html"]
