"""Which plotly.js a self-contained page inlines: the small bundle where it draws every trace.

Running plotly.js is most of the time a self-contained page takes to open (a lesson, an
``explorer read --html`` report). ``vendor/plotly-small.min.js`` is plotly.js with the trace
types of :data:`SMALL_TRACES` alone (1.3 MB instead of 4.8, about a quarter of the time to run;
``vendor/build.js`` makes it). A page with any other type (``scattergl``: a view past its
WebGL switch-over), or a bundle whose version is not the one the installed plotly writes its
figures for, gets plotly's full bundle: slower, never wrong.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional

#: The trace types ``vendor/plotly-small.min.js`` registers (``vendor/entry.js``).
SMALL_TRACES = frozenset({"bar", "heatmap", "scatter", "table"})
SMALL_BUNDLE = Path(__file__).resolve().parent / "vendor" / "plotly-small.min.js"

_VERSION = re.compile(r"plotly\.js \(?[^v]*v(\d+\.\d+\.\d+)")


def bundle_version(js: str) -> str:
    """The plotly.js version a bundle's banner names ("" when it names none)."""
    found = _VERSION.search(js[:500])
    return found.group(1) if found else ""


def figure_types(figures: Iterable[object]) -> set[str]:
    """Every trace type ``figures`` (plotly figures) draw."""
    return {str(trace.type) for fig in figures for trace in getattr(fig, "data", ())}


def plotly_js(types: set[str]) -> str:
    """The smaller bundle when it draws every one of ``types`` and matches plotly's version."""
    from explorer.errors import require

    offline = require("plotly.offline", "lab", "Writing a page")
    if types <= SMALL_TRACES and SMALL_BUNDLE.exists():
        small = SMALL_BUNDLE.read_text(encoding="utf-8")
        if bundle_version(small) == offline.get_plotlyjs_version():
            return small  # the 4.8 MB full bundle is not read at all
    return offline.get_plotlyjs()


@lru_cache(maxsize=None)
def small_bundle_for(version: str) -> Optional[bytes]:
    """The small bundle's bytes when it is plotly.js ``version`` (what a live widget sends a page
    whose figures draw only :data:`SMALL_TRACES`), else None: a page must never mix versions."""
    if not SMALL_BUNDLE.exists():
        return None
    small = SMALL_BUNDLE.read_bytes()
    return small if bundle_version(small[:500].decode("ascii", "replace")) == version else None


__all__ = [
    "SMALL_BUNDLE",
    "SMALL_TRACES",
    "bundle_version",
    "figure_types",
    "plotly_js",
    "small_bundle_for",
]
