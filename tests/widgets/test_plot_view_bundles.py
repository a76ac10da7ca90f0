"""What ``PlotView`` sends when the page asks for plotly.js: the bundle asked for, named, of one version.

The page side (which bundle a figure needs, moving to the full one) is checked in Chromium in
``tests/browser/test_plot_view_in_chromium.py``; here, the kernel's answer.
"""

from __future__ import annotations

from explorer.ui import plot_view
from explorer.ui.plot_view import _PLOTLY_JS, _SMALL_TYPES, _VERSION, PlotView
from explorer.ui.plotly_bundle import SMALL_BUNDLE, SMALL_TRACES, bundle_version


def _answer(monkeypatch, asked: object) -> tuple[dict, bytes]:
    view = PlotView()
    sent: list = []
    monkeypatch.setattr(view, "send", lambda content, buffers=None: sent.append((content, buffers)))
    view._message(view, {"type": "plotly?", "bundle": asked}, [])
    assert len(sent) == 1
    content, buffers = sent[0]
    return content, bytes(buffers[0])


def test_the_small_bundle_is_this_plotly_version_and_the_page_is_told_its_types():
    assert bundle_version(SMALL_BUNDLE.read_text(encoding="utf-8")) == _VERSION
    assert PlotView().small_types == sorted(SMALL_TRACES) == _SMALL_TYPES


def test_asked_for_the_small_bundle_the_page_gets_it_named_small(monkeypatch):
    content, body = _answer(monkeypatch, "small")
    assert content == {"type": "plotly", "bundle": "small"}
    assert body == SMALL_BUNDLE.read_bytes()


def test_asked_for_the_full_bundle_or_for_nothing_named_the_page_gets_the_full_one(monkeypatch):
    for asked in ("full", None, "something else"):
        content, body = _answer(monkeypatch, asked)
        assert content == {"type": "plotly", "bundle": "full"}
        assert body == _PLOTLY_JS.read_bytes()


def test_a_small_bundle_of_another_version_is_never_sent(monkeypatch):
    monkeypatch.setattr(plot_view, "small_bundle_for", lambda version: None)
    content, body = _answer(monkeypatch, "small")
    assert content["bundle"] == "full" and body == _PLOTLY_JS.read_bytes()


def test_warm_page_opens_one_model_that_carries_the_small_bundle_once_per_kernel(monkeypatch):
    monkeypatch.setattr(plot_view, "_WARM", [])
    plot_view.warm_page()
    plot_view.warm_page()
    assert len(plot_view._WARM) == 1
    assert plot_view._WARM[0].preload == SMALL_BUNDLE.read_bytes()
    assert not PlotView().has_trait("preload"), "a view that is displayed carries no bundle"


def test_warm_page_sends_nothing_when_the_small_bundle_is_another_version(monkeypatch):
    monkeypatch.setattr(plot_view, "_WARM", [])
    monkeypatch.setattr(plot_view, "_VERSION", "0.0.0")
    plot_view.warm_page()
    assert plot_view._WARM == []
