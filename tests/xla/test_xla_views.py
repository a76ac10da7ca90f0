"""XLA figures and the XlaExplorer widget, read back as the browser receives them.

"As the browser receives them" is literal for the explorer: the JSON each ``LiveFigure`` sends
is decoded and every table in it must have a header and some text in every column.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from explorer.xla.views import runs as views

pytestmark = pytest.mark.slow


def test_timeline_marks_new_graphs_and_colours_recompiles(logging_run) -> None:
    fig = views.step_timeline(logging_run).to_dict()
    names = [t["name"] for t in fig["data"]]
    assert names == ["compile", "execute", "step wall time", "new graph"]
    markers = fig["data"][-1]
    new_steps = [s.step for s in logging_run.steps if s.new_graphs]
    assert list(markers["x"]) == new_steps
    colours = dict(zip(markers["x"], markers["marker"]["color"]))
    assert colours[0] == views.NEW and colours[2] == views.RECOMPILE
    assert fig["layout"]["yaxis"]["type"] == "log"
    compile_bars = fig["data"][0]["y"]
    assert compile_bars[0] > 0 and compile_bars[3] is None


def test_graphs_table_groups_near_duplicates(logging_run) -> None:
    fig = views.graphs_table(logging_run).to_dict()
    cells = fig["data"][0]["cells"]["values"]
    groups = [g for g in cells[1] if g != "-"]
    assert groups == sorted(groups, key=int)
    trained = {g.group for g in logging_run.graphs if g.step >= 0}
    assert len(trained) == 1  # the three training graphs are one program with small changes
    assert len(cells[0]) == len(logging_run.graphs)


def test_default_diff_is_the_last_recompile(logging_run) -> None:
    a, b = views.default_pair(logging_run)
    assert logging_run.graph(b).recompile and logging_run.graph(b).closest == a
    fig = views.graph_diff(logging_run, a, b).to_dict()
    kinds = fig["data"][0]["cells"]["values"][0]
    assert "added" in kinds and fig["layout"]["title"]["text"].startswith(f"{a[:8]} -> {b[:8]}")
    missing = views.graph_diff(logging_run, a, "0" * 32).to_dict()
    assert "no HLO" in missing["layout"]["title"]["text"]


def test_explorer_shows_a_run_and_renders_offline(logging_run, tmp_path) -> None:
    from explorer.xla.app import XlaExplorer

    app = XlaExplorer("logging", run=logging_run)
    a, b = views.default_pair(logging_run)
    assert (app.graph_a.value, app.graph_b.value) == (a, b)
    assert app.timeline.figure.data[-1].x == tuple(
        s.step for s in logging_run.steps if s.new_graphs
    )
    assert "application/vnd.jupyter.widget-view+json" in app._repr_mimebundle_()
    page = app.to_html(str(tmp_path / "xla.html"))
    assert "new graph: yes, because" in page and "plotly" in page
    first = logging_run.graphs[-1]
    app.graph_a.value = first.closest
    assert app.diff.figure.layout.title.text.startswith(first.closest[:8])


def test_run_control_does_not_block_and_follows_each_step() -> None:
    from explorer.xla.app import XlaExplorer

    app = XlaExplorer("steady", steps=2)
    assert app.run(block=False) is None and app.run_button.disabled
    result = app.wait(timeout=300)
    assert result is not None and result.ok, app.status.value
    assert app.progress.value == 2 == app.progress.max and not app.run_button.disabled
    assert len(app.timeline.figure.data[-1].x) >= 1


def _empty_columns(table: dict) -> list[str]:
    headers, columns = table["header"]["values"], table["cells"]["values"]
    out = [f"column {i} has an empty header" for i, h in enumerate(headers) if not str(h).strip()]
    return out + [
        f"column {i} ({headers[i]!r}) has no text"
        for i, col in enumerate(columns)
        if not any(str(v).strip() for v in col)
    ]


def _graph(step: int, recompile: bool = False) -> SimpleNamespace:
    return SimpleNamespace(step=step, recompile=recompile)


def test_title_counts_what_the_text_counts() -> None:
    """The seed's run: 2 graphs compiled by the steps (the second a near-duplicate of the first),
    2 small ones at setup. The title used to say "4 distinct graph(s), 1 recompile(s)"."""
    seed = SimpleNamespace(graphs=[_graph(-1), _graph(-1), _graph(0), _graph(1, True)])
    assert views.graph_counts(seed) == (
        "steps 0, 1 compiled 2 graphs, 1 a near-duplicate of an earlier graph (red); "
        "2 more at setup"
    )
    assert (
        views.graph_counts(SimpleNamespace(graphs=[_graph(0)]))
        == "step 0 compiled 1 graph, 0 near-duplicates of an earlier graph (red)"
    )
    assert views.graph_counts(SimpleNamespace(graphs=[])) == "the steps compiled no graph"


def test_timeline_title_matches_the_run(logging_run) -> None:
    title = views.step_timeline(logging_run).to_dict()["layout"]["title"]["text"]
    by_steps = [g for g in logging_run.graphs if g.step >= 0]
    assert title.startswith("logging: steps ") and f"compiled {len(by_steps)} graphs" in title
    assert f"{len(logging_run.graphs) - len(by_steps)} more at setup" in title


def test_progress_lines_for_a_notebook_cell(capsys) -> None:
    from explorer.xla.app import print_progress

    print_progress({"event": "setup", "device": {"pjrt_device": "CPU"}, "setup_ms": 1500.0})
    print_progress({"event": "begin", "step": 0})
    print_progress({"event": "step", "step": 0, "wall_ms": 2255.6, "uncached": 1})
    print_progress({"event": "step", "step": 1, "wall_ms": 15.1, "uncached": 0})
    print_progress({"event": "error", "message": "RuntimeError: Check failed: has_layout()"})
    assert capsys.readouterr().out.splitlines() == [
        "model ready on CPU in 1.5 s; stepping ...",
        "step 0: 2.26 s (compiled)",
        "step 1: 0.02 s (from the compile cache)",
        "the child failed: RuntimeError: Check failed: has_layout()",
    ]


def test_tables_are_complete_on_first_display(logging_run) -> None:
    """Issue 10: the graphs table's last column and the diff table's headers opened blank."""
    from explorer.xla.app import XlaExplorer

    assert _empty_columns(views.graphs_table(logging_run).to_dict()["data"][0]) == []
    app = XlaExplorer("logging", run=logging_run)
    for live in (app.graphs, app.diff):
        figure = json.loads(live.widget.spec)
        assert [t["type"] for t in figure["data"]] == ["table"], figure["layout"].get("title")
        assert _empty_columns(figure["data"][0]) == [], figure["layout"]["title"]["text"]
        assert "width" not in figure["layout"]
    graphs = json.loads(app.graphs.widget.spec)["data"][0]["cells"]["values"]
    assert all(len(h) == 8 for h in graphs[0]), "hashes cut like the markers and dropdowns"


def test_callback_errors_are_said_in_the_status_line(logging_run, monkeypatch) -> None:
    from explorer.xla.app import XlaExplorer

    app = XlaExplorer("logging", run=logging_run)
    app.timeline.widget._message(None, {"type": "click", "points": [{"curve": 3, "index": 99}]}, [])
    assert "while diffing the clicked graph: IndexError" in app.status.value

    def broken(*_args):
        raise ValueError("no such pair")

    monkeypatch.setattr(views, "graph_diff", broken)
    app.graph_a.value = next(v for _, v in app.graph_a.options if v != app.graph_a.value)
    assert "while diffing the chosen graphs: ValueError: no such pair" in app.status.value
    app.diff.widget._message(
        None, {"type": "error", "where": "drawing the figure", "message": "bad table"}, []
    )
    assert "bad table" in app.status.value and len(app.errors) == 3
    app.steps.value = 2
    app.options["no_such_option"] = 1
    app.run_button.click()
    assert "while starting the run: TypeError" in app.status.value and not app.run_button.disabled
