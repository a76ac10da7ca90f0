"""XLA figures and the XlaExplorer widget, read back as the browser receives them."""

from __future__ import annotations

import pytest

from explorer.views import xla as views

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
    from explorer.widgets.xla_explorer import XlaExplorer

    app = XlaExplorer("logging", run=logging_run)
    a, b = views.default_pair(logging_run)
    assert (app.graph_a.value, app.graph_b.value) == (a, b)
    assert app.timeline.figure.data[-1].x == tuple(s.step for s in logging_run.steps if s.new_graphs)
    assert "application/vnd.jupyter.widget-view+json" in app._repr_mimebundle_()
    page = app.to_html(str(tmp_path / "xla.html"))
    assert "new graph: yes, because" in page and "plotly" in page
    first = logging_run.graphs[-1]
    app.graph_a.value = first.closest
    assert app.diff.figure.layout.title.text.startswith(first.closest[:8])


def test_run_control_does_not_block_and_follows_each_step() -> None:
    from explorer.widgets.xla_explorer import XlaExplorer

    app = XlaExplorer("steady", steps=2)
    assert app.run(block=False) is None and app.run_button.disabled
    result = app.wait(timeout=300)
    assert result is not None and result.ok, app.status.value
    assert app.progress.value == 2 == app.progress.max and not app.run_button.disabled
    assert len(app.timeline.figure.data[-1].x) >= 1
