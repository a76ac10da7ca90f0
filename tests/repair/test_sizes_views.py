"""The verdict map and the explorer's "every size" panel: load a size, apply a fix, see what moved."""

from __future__ import annotations

import numpy as np

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.rules import RULES, apply_rules, changed_cells
from explorer.pipeline.analysis.sizes import check_sizes, parse_sizes
from explorer.pipeline.app.schedule_explorer import ScheduleExplorer
from explorer.pipeline.views.sizes import VERDICTS, sizes_figure


def test_the_map_colours_each_size_by_its_verdict_and_outlines_the_smallest_failure():
    sweep = check_sizes(
        lambda p, m: build("deepspeed-train", p, m, buffers="fixed", order="legacy"),
        *parse_sizes("2-5:1-6"),
    )
    fig = sizes_figure(sweep)
    heat = fig.data[0]
    z = np.asarray(heat.z)
    assert list(heat.y) == [2, 3, 4, 5] and list(heat.x) == [1, 2, 3, 4, 5, 6]
    for cell in sweep.cells:
        expected = VERDICTS.index("clean") if cell.ok else VERDICTS.index("hazard")
        assert z[cell.stages - 2, cell.microbatches - 1] == expected
    assert "3 stages x 3 micro-batches: stage 1 step 5: SendGrad" in heat.customdata[1][2].replace(
        "<br>", " "
    )
    outline = next(t for t in fig.data if t.name.startswith("smallest failing"))
    assert outline.name == "smallest failing: 3x3" and min(x for x in outline.x if x == x) == 2.5


def test_changed_cells_are_the_steps_the_rules_reordered():
    before = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    after = apply_rules(before, [RULES["grads-first"]])
    cells = changed_cells(before, after)
    assert (2, 6) in cells and (
        1,
        6,
    ) in cells  # the seed's step: stage 2 sends first, stage 1 receives first
    assert changed_cells(before, before) == []


def test_the_panel_loads_a_clicked_size_and_applies_a_found_fix():
    app = ScheduleExplorer("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    app.sizes.range.value = "2-6:1-8"
    app.sizes.check_button.click()
    assert "smallest failing size: 3 stages x 3 micro-batches" in app.sizes.status.value
    app.sizes._clicked(
        [{"curve": 0, "x": 3, "y": 3}]
    )  # what the page sends for a click on that cell
    assert (app.settings.stages, app.settings.microbatches) == (3, 3)
    assert app.selected is not None and (app.selected.stage, app.selected.step) == (1, 5)
    app.sizes.fix_button.click()
    assert app.sizes.candidates.options[0][0].startswith("grads-first: buffers at 4x8 4,3,2,2")
    app.sizes.candidates.value = 0  # choose the best fix
    assert app.settings.rules == ("grads-first",) and app.report.ok
    # the page's list cuts the long line at its edge; the choice is said in full below it
    assert app.sizes.candidates.get_state()["index"] == 0
    assert "DeepSpeed&#x27;s fix: send the gradient before receiving" in app.sizes.chosen.value
    app.sizes.fix_button.click()  # a second search: the page's list follows the kernel again
    app.sizes.candidates.value = 1
    assert app.sizes.candidates.get_state()["index"] == 1 and "buffers+1" in app.sizes.chosen.value
    moved = next(t for t in app.figures["grid"].data if t.name == "moved by the fix")
    assert (
        len([x for x in moved.x if x == x]) > 0 and "grads-first" in app.controls.rules_label.value
    )
    app.controls.clear_rules.click()
    assert app.settings.rules == () and not app.report.ok and app.problem.value == ""


def test_a_range_too_large_for_the_page_is_said_not_run():
    app = ScheduleExplorer("1f1b", 4, 8)
    app.sizes.range.value = (
        "1-64:1-200"  # 12,800 sizes: fine for the CLI on every core, too slow for the page
    )
    app.sizes.check_button.click()
    assert (
        "while checking every size" in app.problem.value
        and "explorer check --sweep" in app.problem.value
    )
