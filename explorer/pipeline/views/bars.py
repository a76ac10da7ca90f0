"""Horizontal bars that stay fast from ten to a hundred thousand of them.

Below ``max_bars`` a bar is a real ``go.Bar`` (hover per bar, text inside). Above it, SVG
bars make the browser crawl, so the same intervals become one WebGL line trace
(``go.Scattergl``) with a thick segment per interval, ``None`` between segments: one trace,
drawn on the GPU, whatever the count. Hover then sits on the segment ends.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go

#: Default switch-over to WebGL; tests and the benchmark use the same number.
MAX_SVG_BARS = 3000


def hbars(
    name: str,
    y: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    colour: str,
    *,
    hover: Optional[Sequence[str]] = None,
    text: Optional[Sequence[str]] = None,
    width: float = 0.8,
    max_bars: int = MAX_SVG_BARS,
    opacity: float = 1.0,
    showlegend: bool = True,
    line_px: float = 6.0,
) -> go.Bar | go.Scattergl:
    """Intervals ``[start, end)`` on rows ``y`` as one trace named ``name``."""
    y = np.asarray(y, dtype=float)
    start = np.asarray(start, dtype=float)
    end = np.asarray(end, dtype=float)
    if len(y) <= max_bars:
        return go.Bar(
            name=name,
            orientation="h",
            y=y,
            base=start,
            x=end - start,
            width=width,
            marker=dict(color=colour, line=dict(width=0.5, color="white")),
            opacity=opacity,
            hovertext=None if hover is None else list(hover),
            hovertemplate="%{hovertext}<extra></extra>" if hover is not None else None,
            text=None if text is None else list(text),
            textposition="inside",
            insidetextanchor="middle",
            showlegend=showlegend,
        )
    xs = np.column_stack([start, end, np.full(len(y), np.nan)]).reshape(-1)
    ys = np.column_stack([y, y, np.full(len(y), np.nan)]).reshape(-1)
    hov = None
    if hover is not None:
        hov = [h for item in hover for h in (item, item, "")]
    return go.Scattergl(
        name=name,
        x=xs,
        y=ys,
        mode="lines",
        line=dict(color=colour, width=line_px),
        opacity=opacity,
        hovertext=hov,
        hoverinfo="text" if hov is not None else "skip",
        connectgaps=False,
        showlegend=showlegend,
    )


def rectangles(
    x0: np.ndarray, x1: np.ndarray, y0: np.ndarray, y1: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Closed outlines of many rectangles as one ``None``-separated polyline (x, y)."""
    x0, x1, y0, y1 = (np.asarray(a, dtype=float) for a in (x0, x1, y0, y1))
    gap = np.full(len(x0), np.nan)
    xs = np.column_stack([x0, x1, x1, x0, x0, gap]).reshape(-1)
    ys = np.column_stack([y0, y0, y1, y1, y0, gap]).reshape(-1)
    return xs, ys


__all__ = ["MAX_SVG_BARS", "hbars", "rectangles"]
