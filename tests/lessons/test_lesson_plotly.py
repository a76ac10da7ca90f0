"""Which plotly.js a lesson carries: the small bundle when it can draw every figure, else the full one.

The small bundle (``explorer/ui/vendor/plotly-small.min.js``) is plotly.js with four trace
types; running plotly.js is most of a lesson's open. A figure of another type, or a bundle of
another plotly.js version than the one plotly writes its figures for, must get the full bundle.
"""

from __future__ import annotations

import re

import pytest
from plotly.offline import get_plotlyjs

from explorer.lessons.page import trace_types
from explorer.ui import plotly_bundle
from explorer.ui.plotly_bundle import SMALL_BUNDLE, SMALL_TRACES, bundle_version, plotly_js


def test_the_small_bundle_is_the_plotly_js_version_plotly_writes_figures_for():
    small, full = (
        bundle_version(SMALL_BUNDLE.read_text(encoding="utf-8")),
        bundle_version(get_plotlyjs()),
    )
    assert full, "plotly's bundle names no version"
    assert small == full, (
        f"explorer/ui/vendor/plotly-small.min.js is plotly.js {small}, plotly ships {full}: "
        "rebuild it (explorer/ui/vendor/build.js)"
    )


def test_the_bundle_registers_exactly_the_types_lesson_traces_names():
    entry = (SMALL_BUNDLE.parent / "entry.js").read_text(encoding="utf-8")
    registered = set(re.findall(r"require\('plotly\.js/lib/(\w+)'\)", entry)) - {"core"}
    assert registered | {"scatter"} == SMALL_TRACES  # scatter is in plotly.js's core


@pytest.mark.parametrize(
    "types, small",
    [
        ({"bar", "heatmap"}, True),
        (set(), True),
        (set(SMALL_TRACES), True),
        ({"bar", "pie"}, False),
    ],
)
def test_a_lesson_gets_the_small_bundle_only_when_it_draws_every_trace(types, small):
    assert (plotly_js(types) == SMALL_BUNDLE.read_text(encoding="utf-8")) is small
    assert small or plotly_js(types) == get_plotlyjs()


def test_a_bundle_of_another_version_is_never_used(tmp_path, monkeypatch):
    stale = tmp_path / "plotly-lessons.min.js"
    stale.write_text("/**\n* plotly.js (lessons: bar) v0.0.1\n*/\nvar Plotly={};", encoding="utf-8")
    monkeypatch.setattr(plotly_bundle, "SMALL_BUNDLE", stale)
    assert plotly_js({"bar"}) == get_plotlyjs()


def test_trace_types_reads_the_stored_figures_with_plotlys_default_type():
    data = {
        "figures": {
            "pieces": [{}, {"type": "heatmap"}, {"x": [1]}, {"type": "table"}],
            "figures": [[0, -1, [1, 2]], [0, -1, []]],
        }
    }
    assert trace_types(data) == {"heatmap", "scatter"}  # piece 3 belongs to no figure
    assert trace_types({"blocks": []}) == set()
