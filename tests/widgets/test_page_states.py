"""What the schedule explorer says is about what it shows, whatever a person did before.

Each test drives the widgets' observers the way the page does (setting a control's value, a
click), by the notebooks' own steps: 02's "Try it" (check every size on the seed's schedule,
then P2P order -> fixed), 01's (switch kinds, apply a found fix), 03's (a failed run).
"""

from __future__ import annotations

import re

from explorer.pipeline.app.schedule_explorer import ScheduleExplorer


def words(value: str) -> str:
    """HTML as a person reads it: tags dropped, entities for quotes undone."""
    text = re.sub(r"<[^>]+>", " ", value).replace("&#x27;", "'")
    return re.sub(r"\s+", " ", text).strip()


def seed_app(**kwargs) -> ScheduleExplorer:
    """Notebook 02's explorer: the seed's broken combination."""
    return ScheduleExplorer(
        "deepspeed-train", stages=4, microbatches=8, buffers="fixed", order="legacy", **kwargs
    )


def test_02_the_sizes_map_is_marked_once_the_order_is_fixed_and_unmarked_back():
    app = seed_app()
    app.sizes.check_button.click()
    said = words(app.sizes.status.value)
    assert said.startswith("deepspeed-train (buffers fixed, P2P order legacy): 84 of 112 sizes")
    app.controls.order.value = "fixed"  # 02's next step: today's DeepSpeed, no findings
    assert app.report.ok
    said = words(app.sizes.status.value)
    assert (
        "This map describes deepspeed-train (buffers fixed, P2P order legacy), not the schedule "
        "above (deepspeed-train (buffers fixed, P2P order fixed))" in said
    ), said
    title = app.sizes.figure.figure.layout.title.text
    assert "This map describes" in title and "earlier settings" in str(
        app.sizes.figure.figure.layout.annotations
    )
    assert {t.opacity for t in app.sizes.figure.figure.data} == {0.3}
    app.controls.stages.value = 5  # a size change: the map already spans it, no new mark
    assert "This map describes" in words(app.sizes.status.value)
    app.controls.order.value = "legacy"  # back to what the map describes: unmarked
    assert "This map describes" not in words(app.sizes.status.value)
    assert {t.opacity for t in app.sizes.figure.figure.data} == {None}


def test_01_switching_the_kind_marks_the_map_and_rechecking_clears_the_mark():
    app = seed_app()
    app.sizes.check_button.click()
    app.controls.kind.value = "1f1b"
    assert "not the schedule above (1f1b (buffers default))" in words(app.sizes.status.value)
    app.sizes.check_button.click()
    said = words(app.sizes.status.value)
    assert "This map describes" not in said and said.startswith("1f1b (buffers default): no hazard")


def test_01_a_chosen_fix_becomes_the_map_and_a_second_choice_replaces_the_first():
    app = seed_app()
    app.sizes.fix_button.click()
    options = app.sizes.candidates.options
    assert len(options) >= 2 and options[0][0].startswith("grads-first")
    app.sizes.candidates.value = 0
    assert app.settings.rules == ("grads-first",) and app.report.ok
    # the map is the fix's own proof, and says so: no red map under a clean schedule
    said = words(app.sizes.status.value)
    assert said.startswith("deepspeed-train (buffers fixed, P2P order legacy, rules grads-first)")
    assert (
        "no hazard, mismatch, deadlock or wrong gradient count at any of" in said
        and "This map" not in said
    )
    second = app.sizes.search.candidates[1].names
    app.sizes.candidates.value = 1  # replaces the first: "chosen:" and the rules agree
    assert app.settings.rules == tuple(second), app.settings.rules
    assert " + ".join(second) in app.sizes.chosen.value
    assert words(app.controls.rules_label.value).startswith(f"rules applied: {', '.join(second)}")
    app.controls.clear_rules.click()  # remove the rules: no candidate is applied any more
    assert app.settings.rules == () and app.sizes.chosen.value == ""
    assert app.sizes.candidates.value is None and app.sizes.candidates.get_state()["index"] is None
    said = words(app.sizes.status.value)  # the map is the search's own of these settings again
    assert said.startswith("deepspeed-train (buffers fixed, P2P order legacy): 84 of 112 sizes")
    app.controls.kind.value = "gpipe"  # candidates searched from other settings go away
    assert app.sizes.candidates.options == () and app.sizes.candidates.layout.display == "none"


def test_leaving_deepspeed_train_with_fixed_buffers_adapts_the_controls_and_keeps_working():
    app = seed_app()
    app.controls.kind.value = "1f1b"
    assert app.report.schedule.name.startswith("1f1b") and not app.errors
    assert app.controls.buffers.value == "default" and "fixed" not in app.controls.buffers.options
    assert app.controls.order.disabled and app.controls.order.get_state()["index"] == 0
    said = words(app.status.value)
    assert "buffers set to default for 1f1b" in said and "--" not in said
    app.controls.stages.value = 6  # later changes take effect
    app.controls.microbatches.value = 12
    assert (app.report.schedule.num_stages, app.report.schedule.num_microbatches) == (6, 12)
    assert "buffers set to default" not in words(app.status.value)  # said once, at the switch
    app.controls.kind.value = "deepspeed-train"  # back: every DeepSpeed choice is offered again
    assert list(app.controls.buffers.options) == ["default", "minimal", "legacy", "fixed"]
    assert app.controls.order.value == "default" and not app.controls.order.disabled


def test_interleaving_gets_two_chunks_and_a_smaller_bubble():
    app = ScheduleExplorer("1f1b", 4, 8)
    bubble = app.report.timeline.bubble.of_total
    app.controls.kind.value = "interleaved-1f1b"
    assert app.controls.chunks.value == 2 and app.report.schedule.num_stages == 8
    assert app.report.timeline.bubble.of_total < bubble
    assert "chunks / rank set to 2" in words(app.status.value)
    app.controls.kind.value = "1f1b"
    assert app.controls.chunks.value == 1 and app.controls.chunks.disabled


def test_an_invalid_setting_hides_the_last_verdict_and_turns_run_off():
    app = ScheduleExplorer("1f1b", 4, 8, runner=lambda schedule, costs: None)
    assert not app.run_button.disabled
    app.controls.kind.value = "dualpipev"  # 4 ranks need 8 micro-batches: fine
    app.controls.stages.value = 5  # 10 stages need 10 micro-batches
    said = words(app.status.value)
    assert "use micro-batches 10 or more" in said and "--" not in said, said
    assert "verdict" not in said.split("last valid schedule")[0]
    assert app.findings.widget.layout.display == "none" and app.gradients.layout.display == "none"
    assert app.run_button.disabled and "not a valid schedule" in app.run_button.tooltip
    app.controls.microbatches.value = 10
    assert app.report.schedule.num_ranks == 5 and not app.run_button.disabled
    assert app.findings.widget.layout.display is None


def test_zoom_to_the_selected_finding_again_after_zooming_away():
    app = seed_app()
    assert app.findings.again.layout.display == "none"
    app.findings.select(0)
    first = app.findings.findings[0]
    near = app.figures["grid"].layout.xaxis.range
    assert near[0] < first.step < near[1] and app.findings.again.layout.display is None
    app._zoomed("grid", "auto")  # the user double-clicks the grid: the whole schedule
    whole = app.figures["grid"].layout.xaxis.range
    assert whole[1] - whole[0] > near[1] - near[0]
    app.findings.list.value = 0  # re-clicking the selected line: the page sends nothing
    assert app.figures["grid"].layout.xaxis.range == whole
    app.findings.again.click()
    assert tuple(app.figures["grid"].layout.xaxis.range) == tuple(near)
