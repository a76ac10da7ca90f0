"""The XLA step timeline and run header of a run read back from artifacts (no per-step times,
no device), as a person sees them in ``XlaExplorer.open``: built from records, no torch_xla."""

from __future__ import annotations

from read_back_run import read_back_run as _read_back_run

from explorer.xla.views import runs as views


def test_a_run_without_times_marks_every_step_on_one_row_not_an_empty_log_axis():
    run = _read_back_run()
    fig = views.step_timeline(run).to_dict()
    layout = fig["layout"]
    # it showed a log axis of 0.001-0.01 ms with nothing on it and the triangles at a made-up height
    assert layout["yaxis"].get("type") != "log" and layout["yaxis"]["visible"] is False
    names = [t["name"] for t in fig["data"]]
    assert "compile" not in names and names[-1] == "new graph"  # the widget clicks the last trace
    cached = next(t for t in fig["data"] if t["name"] == "ran from the compile cache")
    assert list(cached["x"]) == [3, 4, 5] and list(fig["data"][-1]["x"]) == [0, 1, 2]
    assert "no per-step times" in " ".join(a["text"] for a in layout["annotations"])
    # the legend in the bottom margin, under the "step" title (at y=-0.45 of a short plot it
    # would sit on it)
    assert (layout["legend"]["yref"], layout["legend"]["y"]) == ("container", 0.0)
    assert layout["margin"]["b"] >= 100


def test_a_run_without_a_device_does_not_say_on_question_marks():
    text = views.run_html(_read_back_run())
    assert "?" not in text.split("</p>")[0] and "read /tmp/x" in text
