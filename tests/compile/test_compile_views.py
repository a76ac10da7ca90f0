"""The compile figures and the widget, from one real probe run (aot_eager: quick).

Tables are checked the way the page receives them: the JSON a ``LiveFigure`` sends, decoded,
must have a header and some text in every column (issue 10 saw blank columns on first display).
"""

from __future__ import annotations

import io
import json
import logging

import pytest
from built_once import built_once

from explorer.compile import views
from explorer.compile.app import probe_scenario
from explorer.compile.traces.records import CompileEvent, Iteration, ProbeResult

LIMIT_BLOCK = """torch._dynamo hit config.recompile_limit (4)
   function: 'forward' (/work/main/explorer/compile/runtime/models.py:34)
   last reason: 0/3: self.mode == 3
To log all recompilation reasons, use TORCH_LOGS="recompiles"."""


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
    """One real probe run for the module, made by one xdist worker (its result pickles)."""
    return built_once(tmp_path_factory, "compile-limit-aot-eager", _probe)


def _probe():
    notes: list[str] = []
    return probe_scenario("limit", iterations=18, backend="aot_eager", notes=notes), notes


@pytest.fixture(scope="module")
def limit_result(probed):
    return probed[0]


def empty_columns(table: dict) -> list[str]:
    """Columns of a table trace (as plotly JSON) with an empty header or no text in any cell."""
    headers = table["header"]["values"]
    columns = table["cells"]["values"]
    out = [f"column {i} has an empty header" for i, h in enumerate(headers) if not str(h).strip()]
    out += [
        f"column {i} ({headers[i]!r}) has no text"
        for i, col in enumerate(columns)
        if not any(str(v).strip() for v in col)
    ]
    if len(columns) != len(headers):
        out.append(f"{len(headers)} headers for {len(columns)} columns")
    return out


def sent(live) -> dict:
    """The figure exactly as the page receives it: the JSON the LiveFigure's view carries."""
    return json.loads(live.widget.spec)


@pytest.mark.slow  # a real probe: torch.compile
def test_iteration_figure_colours_by_variant_and_marks_compiles(limit_result) -> None:
    fig = views.iteration_figure(limit_result).to_dict()
    bars = {t["name"]: t for t in fig["data"] if t["type"] == "bar"}
    assert set(bars) == {
        "variant 0/0",
        "variant 0/1",
        "variant 0/2",
        "variant 0/3",
        "ran eagerly (no variant matched)",
    }
    assert sorted(x for t in bars.values() for x in t["x"]) == list(range(18))
    assert list(bars["ran eagerly (no variant matched)"]["x"]) == [4, 5, 10, 11, 16, 17]
    marks = next(t for t in fig["data"] if t["name"].startswith("compile"))
    assert list(marks["x"]) == [0, 1, 2, 3] and list(marks["text"]) == ["0/0", "0/1", "0/2", "0/3"]
    assert "period 6 (eager-fallback)" in fig["layout"]["title"]["text"]
    assert fig["layout"]["yaxis"]["type"] == "log"


@pytest.mark.slow  # a real probe: torch.compile
def test_bars_are_one_iteration_wide_and_the_axis_spans_the_iterations(limit_result) -> None:
    """A variant that runs every sixth iteration keeps bars narrower than one iteration, and the
    axis neither starts at -1 nor -3 (plotly's inferred widths did both)."""
    fig = views.iteration_figure(limit_result).to_dict()
    for bar in (t for t in fig["data"] if t["type"] == "bar"):
        assert bar["width"] == views.BAR_WIDTH < 1, bar["name"]
    assert fig["layout"]["xaxis"]["range"] == [-0.5, 17.5]
    assert fig["layout"]["xaxis"]["tick0"] == 0 and fig["layout"]["xaxis"]["dtick"] == 1


@pytest.mark.slow  # a real probe: torch.compile
def test_the_legend_sits_under_the_axis_title_not_on_it(limit_result) -> None:
    """At ``y=-0.2`` of the plot the legend sat on the "iteration" title in the explorer (seen in
    JupyterLab); anchored to the figure's bottom edge, in a margin that holds the tick labels,
    the title and a legend row, it cannot."""
    layout = views.iteration_figure(limit_result).to_dict()["layout"]
    legend = layout["legend"]
    assert (legend["yref"], legend["y"], legend["yanchor"]) == ("container", 0.0, "bottom")
    assert layout["margin"]["b"] >= 20 + 30 + 2 * 25  # ticks, title, up to two legend rows


@pytest.mark.slow  # a real probe: torch.compile
def test_the_recompile_limit_is_marked_where_it_was_hit(limit_result) -> None:
    fig = views.iteration_figure(limit_result).to_dict()
    lines = [s for s in fig["layout"]["shapes"] if s["type"] == "line"]
    assert [s["x0"] for s in lines] == [3.5]
    assert any("recompile limit (4) hit" in a["text"] for a in fig["layout"]["annotations"])


@pytest.mark.slow  # a real probe: torch.compile
def test_tables_list_compiles_and_guard_differences(limit_result) -> None:
    cells = views.compile_table(limit_result).to_dict()["data"][0]["cells"]["values"]
    assert list(cells[0]) == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert cells[3][0] == "first compile" and cells[3][4].startswith("RecompileLimitExceeded: ")
    assert cells[2][4] == "forward", "the failed compile names its frame's function"
    guards = views.guards_table(limit_result).to_dict()["data"][0]["cells"]["values"]
    assert list(guards[0]) == ["0/0", "0/1", "0/2", "0/3"]
    assert all(f"mode == {i}" in text for i, text in enumerate(guards[2]))


def test_tables_with_nothing_to_list_still_fill_every_column() -> None:
    bare = ProbeResult(iterations=[Iteration(0, 1.0, False)], label="eager")
    for fig in (views.compile_table(bare), views.guards_table(bare)):
        assert empty_columns(fig.to_dict()["data"][0]) == []
    one = ProbeResult(
        iterations=[Iteration(0, 9.0, True, ("0/0",))], compiles=[CompileEvent("0/0", 0, "forward")]
    )
    assert empty_columns(views.compile_table(one).to_dict()["data"][0]) == []


@pytest.mark.slow  # a real probe: torch.compile
def test_diagnosis_html_flags_findings(limit_result) -> None:
    text = views.diagnosis_html(limit_result)
    assert "class='finding'" in text and "eager-fallback, period 6" in text


def test_torch_warnings_are_said_in_the_explorers_words() -> None:
    limit = views.explain_torch_message(LIMIT_BLOCK)
    assert limit.startswith("Dynamo hit its recompile_limit (4) on 'forward'") and "\n" not in limit
    cuda = views.explain_torch_message("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
    assert "CUDA_HOME=/usr/local" in cuda and "CPU" in cuda
    other = views.explain_torch_message(
        "W1124 09:51:15.891000 1955 torch/x.py:1] [0/0] something odd\nmore"
    )
    assert other == "torch warned: something odd"
    assert views.notes_html([]) == ""
    assert views.notes_html([LIMIT_BLOCK, LIMIT_BLOCK]).count("<li>") == 1


@pytest.mark.slow  # a real probe: torch.compile
def test_probe_keeps_torch_warnings_off_the_console_and_hands_them_back() -> None:
    """A console handler on torch's logger (as torch installs its own) prints nothing of the probe's
    warnings, which come back as notes; after the probe the handler prints again."""
    import torch._dynamo  # noqa: F401 - torch's loggers exist, as in a kernel that imported it

    console = io.StringIO()
    handler = logging.StreamHandler(console)
    logger = logging.getLogger("torch._dynamo")
    logger.addHandler(handler)
    try:
        notes: list[str] = []
        result = probe_scenario("limit", iterations=6, backend="aot_eager", notes=notes)
        assert "recompile_limit" not in console.getvalue(), console.getvalue()
        assert any("recompile_limit" in n for n in notes), notes
        assert result.diagnosis.cause == "eager-fallback", "what the warning said is in the records"
        logger.warning("after the probe: printed again")
        assert "printed again" in console.getvalue(), "the filter is removed after the probe"
    finally:
        logger.removeHandler(handler)


@pytest.mark.slow  # a real probe: torch.compile
def test_widget_shows_result_and_reruns(limit_result, tmp_path) -> None:
    from explorer.compile.app import CompileExplorer

    app = CompileExplorer("limit", backend="aot_eager", result=limit_result)
    assert len(app.time_fig.figure.data) == len(views.iteration_figure(limit_result).data)
    assert "application/vnd.jupyter.widget-view+json" in app._repr_mimebundle_()
    static = app._repr_html_()
    assert "eager-fallback" in static and static.count("Plotly.newPlot") == 3
    app.scenario.value = "shapes"
    assert app.iterations.value == 18, "choosing a scenario restores its default iterations"
    app.iterations.value = 6
    rerun = app.run()
    assert app.time_fig.figure.layout.title.text.startswith("shapes") and rerun.label == "shapes"
    assert list(app.compile_fig.figure.data[0].cells.values[0]) == ["0/0", "0/1"]
    assert app.run_button.disabled is False and "shapes: 6 iterations" in app.status.value
    page = app.to_html(str(tmp_path / "probe.html"))
    assert (tmp_path / "probe.html").read_text() == page and "<!DOCTYPE html>" in page


@pytest.mark.slow  # a real probe: torch.compile
def test_first_display_sends_complete_tables(probed) -> None:
    """What the page gets on first display: every table has headers and text in every column."""
    from explorer.compile.app import CompileExplorer

    result, notes = probed
    app = CompileExplorer("limit", backend="aot_eager", result=result)
    for live in (app.compile_fig, app.guard_fig):
        figure = sent(live)
        assert [t["type"] for t in figure["data"]] == ["table"]
        assert empty_columns(figure["data"][0]) == [], figure["layout"]["title"]["text"]
        assert "width" not in figure["layout"] and figure["layout"]["autosize"] is True
    timeline = sent(app.time_fig)
    assert {t["width"] for t in timeline["data"] if t["type"] == "bar"} == {views.BAR_WIDTH}
    assert "width" not in timeline["layout"]
    assert any("recompile_limit" in n for n in notes)


@pytest.mark.slow  # a real probe: torch.compile
def test_callback_errors_are_said_in_the_status_line(limit_result, monkeypatch) -> None:
    from explorer.compile import app as compile_explorer

    app = compile_explorer.CompileExplorer("limit", backend="aot_eager", result=limit_result)

    def broken(*_args, **_kwargs):
        raise RuntimeError("the probe broke")

    monkeypatch.setattr(compile_explorer, "probe_scenario", broken)
    app.run_button.click()
    assert "while running the probe: RuntimeError: the probe broke" in app.status.value
    assert f"Below: still the earlier result, {limit_result.label}" in app.status.value
    assert app.run_button.disabled is False and app.errors
    monkeypatch.setattr(compile_explorer, "PRESETS", {})
    app.scenario.value = "cycling"
    assert "while choosing a scenario: KeyError" in app.status.value
    app.time_fig.widget._message(
        None, {"type": "error", "where": "drawing the figure", "message": "bad trace"}, []
    )
    assert "bad trace" in app.status.value
