"""Click one point of a plotly figure in Chromium, whatever the machine's load.

Plotly answers a click with the point it last hovered (``gd._hoverdata``), and its hover is
throttled: a click that lands before the hover of the mouse's move has run is ignored, or sent
with a stale point. A test that moves and clicks at once therefore passes on an idle machine
and fails on a busy one. Here the click waits until plotly itself says it hovers the wanted
point, so the verdict rests on plotly's state, not on time.
"""

from __future__ import annotations

from typing import Any, Optional

#: The page coordinates of data point (x, y) of a figure's first axes, where plotly drew it.
_WHERE = (
    "(gd, at) => { const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;"
    " const r = gd.getBoundingClientRect();"
    " return [r.left + xa._offset + xa.l2p(at[0]), r.top + ya._offset + ya.l2p(at[1])]; }"
)

#: True once plotly hovers the point at (x, y), or the one whose customdata is ``custom``.
_HOVERS = (
    "([gd, x, y, custom]) => (gd._hoverdata || []).some(p => custom === null"
    " ? Math.abs(+p.x - x) <= 0.5 && Math.abs(+p.y - y) <= 0.5 : p.customdata === custom)"
)


def click_point(
    page: Any, figure: Any, x: float, y: float, custom: Optional[Any] = None, timeout_ms=30_000
) -> None:
    """Hover data point (x, y) of ``figure`` (a locator of a ``.plotly-graph-div``), wait until
    plotly hovers it (the point whose customdata is ``custom``, when given), then click it."""
    figure.scroll_into_view_if_needed()
    px, py = figure.evaluate(_WHERE, [x, y])
    click_pixel(page, figure, (px, py), (x, y, custom), timeout_ms)


def click_pixel(
    page: Any, figure: Any, at: tuple[float, float], wanted: tuple, timeout_ms=30_000
) -> None:
    """Hover page pixel ``at`` over ``figure``, wait until plotly hovers the point ``wanted``
    (x, y, customdata; customdata alone decides when it is not None), then click there."""
    from playwright.sync_api import TimeoutError as Timeout

    page.mouse.move(*at)
    try:
        page.wait_for_function(_HOVERS, arg=[figure.element_handle(), *wanted], timeout=timeout_ms)
    except Timeout:
        raise AssertionError(f"plotly never hovered {wanted} at pixel {at}") from None
    page.mouse.click(*at)
