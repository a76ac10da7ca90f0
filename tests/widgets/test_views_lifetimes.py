"""Buffer lifetimes: the seed's overwrite marked, allocated versus needed in the title."""

from __future__ import annotations

import pytest
from figdict import figure_dict, trace

from explorer.errors import InputError
from explorer.pipeline.views.lifetimes import lifetimes_figure
from explorer.pipeline.views.palette import ACTIVATION, GRADIENT, HAZARD

OVERWRITE = "overwritten while needed (hazard)"


def test_seed_stage_2_marks_the_overwrite_at_step_6(seed_bug):
    d = figure_dict(lifetimes_figure(seed_bug, stage=2))
    assert d["layout"]["title"]["text"].endswith("stage 2: 2 allocated, 3 needed")
    rows = d["layout"]["yaxis"]["ticktext"]
    assert rows == ["stage 2 · buffer 0", "stage 2 · buffer 1"]
    red = trace(d, OVERWRITE)
    assert red["marker"]["color"] == HAZARD
    spans = sorted(zip(red["y"], red["base"], [b + w for b, w in zip(red["base"], red["x"])]))
    stage2 = [h for h in seed_bug.findings.hazards if h.stage == 2]
    assert len(spans) == len(stage2)
    first = spans[0]
    assert first[0] == 0 and 6 <= first[1] < first[2] <= 7  # buffer 0, inside step 6
    assert "RecvActivation(buffer_id=0) at step 6" in red["hovertext"][0].replace("<br>", " ")
    act, grad = trace(d, "activation held"), trace(d, "gradient held")
    assert act["marker"]["color"] == ACTIVATION and grad["marker"]["color"] == GRADIENT
    # Micro-batch 0's gradient phase on buffer 0 overlaps micro-batch 2's activation phase.
    g0 = next(
        (b, b + w)
        for y, b, w, t in zip(grad["y"], grad["base"], grad["x"], grad["text"])
        if y == 0 and t == "mb0"
    )
    a2 = next(
        (b, b + w)
        for y, b, w, t in zip(act["y"], act["base"], act["x"], act["text"])
        if y == 0 and t == "mb2"
    )
    assert a2[0] < g0[1]


def test_fixed_schedule_has_no_overwrites_and_enough_buffers(seed_fixed):
    d = figure_dict(lifetimes_figure(seed_fixed))
    assert trace(d, OVERWRITE)["y"] == []
    alloc, need = list(seed_fixed.buffers.allocated), list(seed_fixed.buffers.needed)
    assert (
        f"allocated {alloc} · needed {need}" in d["layout"]["title"]["text"]
        and "too few" not in d["layout"]["title"]["text"]
    )
    assert len(d["layout"]["yaxis"]["ticktext"]) == sum(alloc)


def test_all_stages_names_the_short_ones(seed_bug):
    title = figure_dict(lifetimes_figure(seed_bug))["layout"]["title"]["text"]
    short = [
        s
        for s, (a, n) in enumerate(zip(seed_bug.buffers.allocated, seed_bug.buffers.needed))
        if n > a
    ]
    assert short and f"too few on stages {', '.join(map(str, short))}" in title


def test_unknown_stage_is_an_input_error(seed_bug):
    with pytest.raises(InputError, match="stages 0..3"):
        lifetimes_figure(seed_bug, stage=4)
