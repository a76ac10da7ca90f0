"""One lesson as one HTML file that needs nothing else: prose, data, plotly.js and the page script.

plotly.js and the lesson's data are inlined gzipped and base64-encoded in two inert
``<script type="application/gzip+base64">`` elements; the page script (``lesson.js``, a few
hundred lines) unzips them with the browser's own ``DecompressionStream``, runs plotly.js from
the text and draws the blocks. So a lesson stays under 5 MB, opens from ``file://`` with the
network off, and makes no request. The prose is plain HTML in the file, readable before the
script has run.

Running plotly.js is most of a lesson's open, so a lesson whose figures use only the trace
types the small bundle draws gets it (:mod:`explorer.ui.plotly_bundle`: 1.3 MB instead of 4.8,
about a quarter of the time to run); any other type gets plotly's full bundle: slower, never
wrong.
"""

from __future__ import annotations

import base64
import gzip
import html
from pathlib import Path
from typing import Any, Sequence

from explorer.lessons.store import compact_json
from explorer.ui.plotly_bundle import plotly_js

HERE = Path(__file__).resolve().parent


def packed(text: str) -> str:
    """``text`` gzipped (the same bytes on every build: no timestamp) and base64-encoded."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode(
        "ascii"
    )


def trace_types(data: dict[str, Any]) -> set[str]:
    """Every trace type the lesson's stored figures draw (plotly's default type is scatter)."""
    store = data.get("figures") or {}
    pieces = store.get("pieces") or []
    return {
        str(pieces[i].get("type") or "scatter")
        for _, _, traces in store.get("figures") or []
        for i in traces
    }


def _asset(name: str) -> str:
    return (HERE / name).read_text(encoding="utf-8")


def _block_html(i: int, block: dict[str, Any]) -> str:
    """Prose inline; every other block a placeholder the script fills from the data."""
    if block["type"] == "prose":
        return f"<div class='prose'>{block['html']}</div>"
    return f"<section class='block {block['type']}' data-block='{i}'></section>"


def lesson_page(data: dict[str, Any]) -> str:
    """The lesson's complete HTML document."""
    title = html.escape(data["title"])
    body = "\n".join(_block_html(i, b) for i, b in enumerate(data["blocks"]))
    notebook = (
        f"<p class='further'>Go further with a kernel: the notebook "
        f"<code>{html.escape(data['notebook'])}</code> explores the same ground freely.</p>"
        if data.get("notebook")
        else ""
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{title}</title><style>{_asset('lesson.css')}</style></head><body>"
        "<nav><a href='index.html'>All lessons</a></nav>"
        f"<h1>{title}</h1><p class='summary'>{html.escape(data.get('summary', ''))}</p>"
        "<p id='loading' class='loading'>Loading the lesson…</p>"
        f"<main>{body}</main>{notebook}"
        f"<script type='application/gzip+base64' id='plotly-js'>{packed(plotly_js(trace_types(data)))}</script>"
        f"<script type='application/gzip+base64' id='lesson-data'>{packed(compact_json(data))}</script>"
        f"<script>{_asset('lesson.js')}</script>"
        "</body></html>\n"
    )


def index_page(lessons: Sequence[Any]) -> str:
    """The list of lessons (title, summary, size), each linked to its file beside this page."""
    items = "".join(
        f"<li><a href='{html.escape(b.path.name, quote=True)}'>{html.escape(b.title)}</a>"
        f"<p>{html.escape(b.summary)}</p><p class='size'>{b.bytes / 1e6:.1f} MB, one file, works offline</p></li>"
        for b in lessons
    )
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Lessons</title>"
        f"<style>{_asset('lesson.css')}</style></head><body>"
        "<h1>Lessons: where distributed training goes quietly wrong</h1>"
        "<p>Each lesson is one HTML file: open it in any browser, offline, with nothing to "
        "install. Every answer it checks was computed by the explorer's analyses.</p>"
        f"<ol class='lessons'>{items}</ol></body></html>\n"
    )


__all__ = ["index_page", "lesson_page", "packed", "trace_types"]
