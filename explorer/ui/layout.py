"""Figure layout every product's views share: the legend under the axis, and tables that fit their rows.

Plain numbers and dicts, no plotly: the views pass them to plotly themselves.
"""

from __future__ import annotations

from typing import Sequence

#: The legend in the figure's bottom margin, under the axis title. Placed at ``y=-0.2`` of the
#: plot instead, it sat on the "iteration" title in the explorer's figure of the ``limit`` probe.
BOTTOM_LEGEND = dict(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.0)
#: Tick labels, the axis title and one or two legend rows.
BOTTOM_MARGIN = 120
#: Characters of table text across a whole row at about 1,000 px, to size tables without scrolling.
CHARS_PER_ROW = 160


def table_height(
    columns: Sequence[Sequence[str]], weights: Sequence[float], base: int = 110
) -> int:
    """Room for every row of a plotly table, counting the lines its longest cell wraps to.

    plotly wraps cell text at spaces inside the column's share of the width; a table drawn
    shorter than its rows scrolls, and a short table looks cut.
    """
    total = float(sum(weights))
    height = base
    for row in zip(*columns):
        lines = 1
        for text, weight in zip(row, weights):
            per_line = max(8, int(CHARS_PER_ROW * weight / total))
            lines = max(lines, sum(1 + len(part) // per_line for part in str(text).split("<br>")))
        height += 8 + 17 * lines
    return min(height, 1200)


__all__ = ["BOTTOM_LEGEND", "BOTTOM_MARGIN", "CHARS_PER_ROW", "table_height"]
