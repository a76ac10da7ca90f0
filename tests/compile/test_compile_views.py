"""The compile figures and the widget, from one real probe run (aot_eager: quick)."""

from __future__ import annotations

import pytest

from explorer.runtime.compile import run_scenario
from explorer.views import compile as views


@pytest.fixture(scope="module")
def limit_result():
    return run_scenario("limit", iterations=18, backend="aot_eager")


def test_iteration_figure_colours_by_variant_and_marks_compiles(limit_result) -> None:
    fig = views.iteration_figure(limit_result).to_dict()
    bars = {t["name"]: t for t in fig["data"] if t["type"] == "bar"}
    assert set(bars) == {"variant 0/0", "variant 0/1", "variant 0/2", "variant 0/3", "variant eager"}
    assert sorted(x for t in bars.values() for x in t["x"]) == list(range(18))
    assert list(bars["variant eager"]["x"]) == [4, 5, 10, 11, 16, 17]
    marks = next(t for t in fig["data"] if t["name"] == "compile")
    assert list(marks["x"]) == [0, 1, 2, 3] and list(marks["text"]) == ["0/0", "0/1", "0/2", "0/3"]
    fell = next(t for t in fig["data"] if t["name"] == "eager fallback")
    assert list(fell["x"]) == [4, 5, 10, 11, 16, 17]
    assert "period 6 (eager-fallback)" in fig["layout"]["title"]["text"]
    assert fig["layout"]["yaxis"]["type"] == "log"


def test_tables_list_compiles_and_guard_differences(limit_result) -> None:
    cells = views.compile_table(limit_result).to_dict()["data"][0]["cells"]["values"]
    assert list(cells[0]) == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert cells[3][0] == "first compile" and cells[3][4].startswith("RecompileLimitExceeded: ")
    guards = views.guards_table(limit_result).to_dict()["data"][0]["cells"]["values"]
    assert list(guards[0]) == ["0/0", "0/1", "0/2", "0/3"]
    assert all(f"mode == {i}" in text for i, text in enumerate(guards[2]))


def test_diagnosis_html_flags_findings(limit_result) -> None:
    text = views.diagnosis_html(limit_result)
    assert "class='finding'" in text and "eager-fallback, period 6" in text


def test_widget_shows_result_and_reruns(limit_result, tmp_path) -> None:
    from explorer.widgets.compile_explorer import CompileExplorer

    app = CompileExplorer("limit", backend="aot_eager", result=limit_result)
    assert len(app.time_fig.data) == len(views.iteration_figure(limit_result).data)
    assert "application/vnd.jupyter.widget-view+json" in app._repr_mimebundle_()
    static = app._repr_html_()
    assert "eager-fallback" in static and static.count("Plotly.newPlot") == 3
    app.scenario.value = "shapes"
    assert app.iterations.value == 18, "choosing a scenario restores its default iterations"
    app.iterations.value = 6
    rerun = app.run()
    assert app.time_fig.layout.title.text.startswith("shapes") and rerun.label == "shapes"
    assert list(app.compile_fig.data[0].cells.values[0]) == ["0/0", "0/1"]
    page = app.to_html(str(tmp_path / "probe.html"))
    assert (tmp_path / "probe.html").read_text() == page and "<!DOCTYPE html>" in page
