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


def test_zero_compute_costs_draw_and_say_there_is_no_ideal_compute():
    # The cost boxes allow 0; a forward-only schedule whose forward costs 0 computes nothing.
    app = ScheduleExplorer("deepspeed-inference", 4, 8)
    app.controls.costs["forward"].value = 0.0
    assert app.errors == [] and app.problem.value == ""
    assert app.report.timeline is not None and app.report.timeline.bubble.of_ideal is None
    assert "no ideal compute" in app.figures["timeline"].layout.title.text
    assert "no ratio to ideal compute time" in words(app.status.value)
    app.controls.costs["forward"].value = 1.0  # and back: the ratio again
    assert "of ideal compute" in app.figures["timeline"].layout.title.text
    assert "no ideal compute" not in app.figures["timeline"].layout.title.text


def test_a_runs_outcome_beside_run_goes_once_another_schedule_is_shown():
    app = ScheduleExplorer("deepspeed-train", 4, 8, runner=lambda schedule, costs: None)
    app.report_run("ran deepspeed-train on 4 processes: losses and gradients bitwise equal")
    app.controls.order.value = "legacy"  # another schedule: that run did not run it
    assert app.run_status.value == ""
    app.report_run("run failed: a peer went away")
    app.controls.stages.value = 3  # an invalid combination (legacy needs buffers fixed)...
    app.controls.buffers.value = "fixed"
    app.controls.stages.value = 99  # ...or one past the slider: nothing of the run stays
    assert app.run_status.value == ""


def test_every_size_refuses_while_the_controls_describe_no_schedule():
    app = ScheduleExplorer("1f1b", 3, 4)
    app.controls.kind.value = "interleaved-1f1b"  # 3 stages x 4 micro-batches: invalid
    assert app.on_screen is None
    app.sizes.range.value = "2-4:1-8"
    app.sizes.check_button.click()
    assert app.sizes.sweep is None and app.sizes.figure.widget.layout.display == "none"
    assert "not a valid schedule" in words(app.problem.value)
    app.sizes.fix_button.click()
    assert app.sizes.search is None and "not a valid schedule" in words(app.problem.value)
    app.controls.microbatches.value = 6  # valid again: the sweep is of what the controls show
    app.sizes.check_button.click()
    assert words(app.sizes.status.value).startswith("interleaved-1f1b")
    assert app.sizes.stale == ""


def test_every_size_refuses_a_schedule_given_from_code():
    from explorer.pipeline import build

    app = ScheduleExplorer("1f1b", 4, 8)
    app.show_schedule(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy"))
    app.sizes.check_button.click()
    assert app.sizes.sweep is None and "given from code" in words(app.problem.value)
    app.controls.stages.value = 5  # the controls' schedule again: it can be swept
    app.sizes.check_button.click()
    assert app.sizes.sweep is not None and words(app.sizes.status.value).startswith("1f1b")


def test_a_click_on_a_size_the_kind_cannot_take_selects_nothing_of_the_old_schedule():
    app = ScheduleExplorer("deepspeed-train", 3, 8)
    app.controls.kind.value = "interleaved-1f1b"  # 3 x 8 is invalid for it
    app.load_size(3, 4)  # a map click: still invalid
    assert app.on_screen is None and app.selected is None
    assert app.controls.lifetimes_stage.value == -1


def test_the_rules_outlines_follow_the_size():
    app = seed_app()
    app.apply_rules(["grads-first"])
    at_4 = list(app.moved)
    assert at_4 and app.controls.rules_label.value.count("outlined") == 1
    app.controls.stages.value = 5
    assert app.moved and app.moved != at_4  # the cells the rule changed at 5 stages
    assert max(stage for stage, _ in app.moved) == 4
    app.apply_rules(None)
    assert app.moved == []
