"""The page side of ``PlotView`` (``explorer/ui/plot_view.js``) in Debian's Chromium: which plotly.js it asks for.

A fresh page spends most of its first seconds parsing plotly.js, so a view asks the kernel for
the small bundle while its figure draws only the types that bundle holds, and for the full one
when a figure needs another type (and from then on every view uses the full one). The module is
loaded as JupyterLab's widget manager loads it (an ES module whose ``render`` gets a model and
an element); the model here is a stand-in that answers ``plotly?`` with the real bundles the
kernel would send (``PlotView._send_plotly``, tested in ``tests/widgets``). The whole path,
kernel included, runs in the notebook tier and in ``benchmarks/bench_browser.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from explorer.ui.plot_view import _PLOTLY_JS, _SMALL_TYPES, _VERSION
from explorer.ui.plotly_bundle import SMALL_BUNDLE

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ORIGIN = "http://explorer.test"
MODULE = Path(__file__).resolve().parents[2] / "explorer" / "ui" / "plot_view.js"

#: A stand-in for an anywidget model: traits in ``state``, custom messages both ways, and the
#: kernel's answer to ``plotly?`` read from the bundle files this test serves.
PAGE = """<!doctype html><html><body><script type="module">
import view from "./plot_view.js";
const listeners = {};
window.asked = []; window.sent = [];
function model(state) {
  return {
    get: (k) => state[k],
    set: (k, v) => { state[k] = v; (listeners["change:" + k] || []).forEach((f) => f()); },
    on: (e, f) => { (listeners[e] = listeners[e] || []).push(f); },
    off: (e, f) => { listeners[e] = (listeners[e] || []).filter((g) => g !== f); },
    send: async (msg) => {
      window.sent.push(msg);
      if (msg.type !== "plotly?") return;
      window.asked.push(msg.bundle);
      const bundle = msg.bundle === "small" ? "small" : "full";
      const body = await (await fetch("./" + bundle + ".js")).arrayBuffer();
      (listeners["msg:custom"] || []).forEach((f) => f({ type: "plotly", bundle }, [body]));
    },
  };
}
const spec = (fig) => new TextEncoder().encode(JSON.stringify(fig));
window.show = async (id, fig, smallTypes) => {
  const el = document.createElement("div"); el.id = id; document.body.appendChild(el);
  const m = model({ spec: spec(fig), revision: 1, plotly_version: VERSION, small_types: smallTypes });
  window[id] = m;
  await view.render({ model: m, el });
};
window.warm = async (url) => {
  const preload = new DataView(await (await fetch(url)).arrayBuffer());
  view.initialize({ model: model({ preload, plotly_version: VERSION }) });
  await window.__explorerPlotly[VERSION].small;
};
window.change = (id, fig) => {
  const m = window[id]; m.set("revision", m.get("revision") + 1); m.set("spec", spec(fig));
};
window.ready = true;
</script></body></html>"""

SCATTER = {"data": [{"type": "scatter", "x": [0, 1, 2], "y": [2, 1, 3], "name": "a"}]}
#: ``box`` is drawn by the full bundle only (SVG, like the small bundle's types).
BOX = {"data": [{"type": "box", "y": [1, 2, 3, 4], "name": "b"}]}


@pytest.fixture
def page(chromium):
    if not _SMALL_TYPES:
        pytest.fail(f"{SMALL_BUNDLE} is missing or not the installed plotly.js version")
    files = {
        "/index.html": (PAGE.replace("VERSION", repr(_VERSION)).encode(), "text/html"),
        "/plot_view.js": (MODULE.read_bytes(), "text/javascript"),
        "/small.js": (SMALL_BUNDLE.read_bytes(), "text/javascript"),
        "/full.js": (_PLOTLY_JS.read_bytes(), "text/javascript"),
    }
    p = chromium.new_page(width=1000, height=800)
    errors: list[str] = []
    p.on("pageerror", lambda e: errors.append(str(e)))

    def serve(route) -> None:
        found = files.get(route.request.url[len(ORIGIN) :])
        if found is None:
            route.fulfill(status=404, body=b"")
        else:
            route.fulfill(status=200, body=found[0], content_type=found[1])

    p.route(f"{ORIGIN}/**", serve)
    p.goto(f"{ORIGIN}/index.html")
    p.wait_for_function("window.ready === true", timeout=30_000)
    yield p
    assert errors == []


def _show(page, view: str, figure: dict, small_types: list) -> None:
    """Render a view of ``figure`` (not awaited here: :func:`_drawn` waits, with a time limit)."""
    page.evaluate(
        f"([fig, small]) => {{ window.show({view!r}, fig, small); }}", [figure, small_types]
    )


def _drawn(page, view: str, revision: int) -> None:
    page.wait_for_function(
        f"window.sent.some(m => m.type === 'drawn' && m.revision === {revision})"
        f" && document.querySelector('#{view}').dataset.revision === '{revision}'",
        timeout=60_000,
    )


def _errors(page) -> list:
    return page.evaluate("window.sent.filter(m => m.type === 'error')")


def _click(page, view: str) -> int:
    """Emit a click on ``view``'s plot as plotly would; the number of click messages sent."""
    page.evaluate(
        f"document.querySelector('#{view} .js-plotly-plot').emit('plotly_click',"
        " {points: [{curveNumber: 0, pointNumber: 1, x: 1, y: 1, data: {name: 'a'}}]})"
    )
    return page.evaluate("window.sent.filter(m => m.type === 'click').length")


def test_a_view_of_small_types_loads_the_small_bundle_and_moves_to_the_full_one_when_needed(
    page,
):
    _show(page, "one", SCATTER, list(_SMALL_TYPES))
    _drawn(page, "one", 1)
    assert page.evaluate("window.asked") == ["small"]
    assert _click(page, "one") == 1

    page.evaluate("fig => window.change('one', fig)", BOX)
    _drawn(page, "one", 2)
    assert page.evaluate("window.asked") == ["small", "full"]
    assert page.evaluate("document.querySelector('#one .js-plotly-plot').data[0].type") == "box"
    assert page.locator("#one .boxlayer path").count() > 0, "the box was not drawn"
    assert _click(page, "one") == 2, "clicks are reported once again after the move"

    # Every later view uses the full bundle the page now has: nothing more is asked for.
    _show(page, "two", SCATTER, list(_SMALL_TYPES))
    _drawn(page, "two", 1)
    assert page.evaluate("window.asked") == ["small", "full"]
    assert _errors(page) == []


def test_a_kernel_without_a_small_bundle_of_its_version_is_only_asked_for_the_full_one(page):
    _show(page, "one", SCATTER, [])
    _drawn(page, "one", 1)
    assert page.evaluate("window.asked") == ["full"]
    assert _errors(page) == []


def test_a_model_that_carries_the_bundle_has_it_parsed_before_any_view_asks(page):
    """warm_page's model: the page runs the bundle in its state when the model is created, and a
    view displayed afterwards draws without asking the kernel for plotly.js."""
    page.evaluate("window.warm('./small.js')")
    assert (
        page.evaluate(f"window.__explorerPlotly[{_VERSION!r}].small.then((got) => got.bundle)")
        == "small"
    )
    _show(page, "one", SCATTER, list(_SMALL_TYPES))
    _drawn(page, "one", 1)
    assert page.evaluate("window.asked") == [], "a view asked for plotly.js the page already had"
    assert page.evaluate("typeof window.Plotly") == "undefined", (
        "the page's globals were left changed"
    )
    assert _errors(page) == []


def test_a_model_without_a_bundle_changes_nothing(page):
    page.evaluate(
        "import('./plot_view.js').then((m) => m.default.initialize({ model: { get: (k) =>"
        f" k === 'plotly_version' ? {_VERSION!r} : new DataView(new ArrayBuffer(0)) }} }}))"
    )
    assert (
        page.evaluate("Object.values(window.__explorerPlotly || {}).some((c) => c.small)") is False
    )
    _show(page, "one", SCATTER, list(_SMALL_TYPES))
    _drawn(page, "one", 1)
    assert page.evaluate("window.asked") == ["small"]


def test_a_bundle_of_another_version_is_never_used_for_a_figure(page):
    """Two kernels in one JupyterLab page may have two plotly.js versions: a view of one never
    draws with the copy the other preloaded."""
    page.evaluate(
        "(async () => { const preload = new DataView(await (await fetch('./small.js')).arrayBuffer());"
        " const { default: view } = await import('./plot_view.js');"
        " view.initialize({ model: { get: (k) => k === 'preload' ? preload : '0.0.1' } });"
        " await window.__explorerPlotly['0.0.1'].small; })()"
    )
    _show(page, "one", SCATTER, list(_SMALL_TYPES))
    _drawn(page, "one", 1)
    assert page.evaluate("window.asked") == ["small"], "the view drew with another kernel's copy"
