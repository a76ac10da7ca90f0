"""Self-contained static HTML pages built from figures and HTML fragments.

A page must open with no network (a CI artifact, a notebook rendered on a website, a file
attached to an issue), so plotly.js is inlined once per page rather than linked from a CDN.
"""

from __future__ import annotations

import html as _html
from typing import Iterable, Union

from explorer.errors import require

Section = Union[str, "object"]  # an HTML fragment or a plotly figure

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 0.85em; }
td, th { border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }
.finding { color: #b00020; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
"""


def figure_div(fig: object, include_plotlyjs: bool | str = False) -> str:
    """One figure as an HTML ``<div>``; plotly.js is included only when asked."""
    pio = require("plotly.io", "lab", "Rendering figures")
    return pio.to_html(
        fig, full_html=False, include_plotlyjs=include_plotlyjs, config={"responsive": True}
    )


def page(title: str, sections: Iterable[Section], extra_figures: Iterable[object] = ()) -> str:
    """A complete HTML document: ``sections`` are HTML strings or plotly figures, in order.

    plotly.js is inlined once, before the first figure, so the page works offline: the small
    bundle where it draws every trace type of the page's figures and of ``extra_figures`` (figures
    already written into HTML sections), else the full one (:mod:`explorer.ui.plotly_bundle`).
    """
    from explorer.ui.plotly_bundle import figure_types, plotly_js

    sections = list(sections)
    figures = [s for s in sections if not isinstance(s, str)] + list(extra_figures)
    parts: list[str] = []
    if figures:
        parts.append(f"<script>{plotly_js(figure_types(figures))}</script>")
    for section in sections:
        parts.append(section if isinstance(section, str) else figure_div(section))
    body = "\n".join(parts)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{_html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body><h1>{_html.escape(title)}</h1>\n{body}\n</body></html>\n"
    )


__all__ = ["Section", "figure_div", "page"]
