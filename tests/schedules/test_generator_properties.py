"""Properties every generator must have, over random stages / micro-batches / chunks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.errors import InputError
from explorer.pipeline.analysis import Costs, build, check, find_deadlock, match
from explorer.pipeline.analysis.reference import run
from explorer.pipeline.analysis.timeline import simulate
from explorer.pipeline.schedules import Kind, generate
from explorer.pipeline.schedules.generators.pipelines import (
    gpipe_plan,
    interleaved_orders,
    one_f_one_b_plan,
)
from explorer.pipeline.schedules.lowering import asap_steps
from tests.schedules.strategies import schedule_args

FAST = settings(max_examples=60, deadline=None)


@FAST
@given(schedule_args())
def test_every_generator_is_valid_with_its_default_buffers(args):
    kind, p, m, v = args
    report = check(build(kind, p, m, chunks=v))
    assert report.ok, [f.describe() for f in report.findings.all()][:3]
    assert all(n <= a for n, a in zip(report.buffers.needed, report.buffers.allocated))


@FAST
@given(schedule_args())
def test_each_stage_computes_each_microbatch_once_per_pass(args):
    kind, p, m, v = args
    s = build(kind, p, m, chunks=v)
    for k in (Kind.FORWARD, Kind.BACKWARD, Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT):
        rows = s.kind == k
        if not rows.any():
            continue
        pairs = set(zip(s.stage[rows].tolist(), s.microbatch[rows].tolist()))
        stages = 2 * p if kind == "dualpipev" else p * v
        assert len(pairs) == rows.sum()
        # every micro-batch passes every stage once; split and full backwards share the work
        assert rows.sum() == stages * m or k in (
            Kind.BACKWARD,
            Kind.BACKWARD_INPUT,
            Kind.BACKWARD_WEIGHT,
        )
    if kind == "deepspeed-inference":
        return
    grads = np.isin(s.kind, (Kind.BACKWARD, Kind.BACKWARD_INPUT))
    assert (
        len(set(zip(s.stage[grads].tolist(), s.microbatch[grads].tolist())))
        == grads.sum()
        == s.num_stages * m
    )
    assert (s.kind == Kind.BACKWARD_WEIGHT).sum() == (s.kind == Kind.BACKWARD_INPUT).sum()
    if kind != "deepspeed-inference":
        assert ((s.kind == Kind.OPTIMIZER_STEP).sum()) == s.num_ranks


@FAST
@given(
    schedule_args(),
    st.sampled_from(["blocking", "batched"]),
    st.floats(0.1, 3),
    st.floats(0.1, 3),
    st.floats(0, 0.5),
    st.floats(0, 0.3),
    st.floats(0, 0.3),
)
def test_fast_timeline_equals_the_reference_simulator(args, model, f, b, lat, send, recv):
    kind, p, m, v = args
    s = build(kind, p, m, chunks=v)
    costs = Costs(
        forward=f,
        backward=b,
        backward_input=b / 2,
        backward_weight=b / 2,
        p2p=lat,
        send=send,
        recv=recv,
    )
    matching = match(s)
    ref = run(s, matching.partner, costs.by_kind()[s.kind.astype(np.int64)], lat, model)
    # PyTorch-style schedules post each send right after its compute; with blocking sends
    # some of them deadlock (which is why PyTorch batches its P2P). Both engines must agree.
    assume_deadlock_free = find_deadlock(s, matching, model) is None
    assert assume_deadlock_free == (not ref.heads)
    if not assume_deadlock_free:
        return
    tl = simulate(s, matching, costs, model)
    np.testing.assert_allclose(tl.start, ref.start, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(tl.end, ref.end, rtol=1e-9, atol=1e-9)


@FAST
@given(
    st.sampled_from(["gpipe", "1f1b", "deepspeed-train"]), st.integers(1, 10), st.integers(1, 40)
)
def test_bubble_closed_forms_with_equal_forward_and_backward(kind, p, m):
    tl = check(build(kind, p, m), Costs(forward=1, backward=1)).timeline
    assert tl.bubble.of_total == pytest.approx((p - 1) / (m + p - 1))
    assert tl.bubble.of_ideal == pytest.approx((p - 1) / m)


@FAST
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 3))
def test_interleaved_bubble_closed_form(p, groups, v):
    m = p * groups
    tl = check(
        build("interleaved-1f1b", p, m, chunks=v), Costs(forward=1 / v, backward=1 / v)
    ).timeline
    assert tl.bubble.of_total == pytest.approx((p - 1) / (v * m + p - 1))


@FAST
@given(st.integers(1, 10), st.integers(1, 40))
def test_peak_activations_closed_forms(p, m):
    one = check(build("1f1b", p, m)).timeline.peak_activations
    assert one == tuple(min(p - s, m) for s in range(p))
    assert check(build("gpipe", p, m)).timeline.peak_activations == (m,) * p
    assert check(build("deepspeed-train", p, m)).timeline.peak_activations == one


@FAST
@given(st.integers(2, 8), st.integers(2, 32))
def test_zero_bubble_h1_beats_1f1b_within_1f1b_peak_memory(p, m):
    costs = Costs(forward=1, backward=2, backward_input=1, backward_weight=1)
    zb = check(build("zb-h1", p, m), costs).timeline
    one = check(build("1f1b", p, m), costs).timeline
    assert zb.makespan < one.makespan
    assert max(zb.peak_activations) <= max(one.peak_activations)


@FAST
@given(st.integers(1, 8), st.integers(1, 24))
def test_closed_form_steps_are_the_unit_time_schedule_of_their_order(p, m):
    for plan in (one_f_one_b_plan(p, m), gpipe_plan(p, m)):
        orders = [[] for _ in range(p)]
        for idx in np.lexsort((plan.step, plan.stage)):
            orders[plan.stage[idx]].append(
                (int(plan.kind[idx]), int(plan.stage[idx]), int(plan.microbatch[idx]))
            )
        steps = asap_steps(orders, p)
        got = [sorted(plan.step[plan.stage == s].tolist()) for s in range(p)]
        assert got == steps


@FAST
@given(st.integers(1, 10), st.integers(1, 30))
def test_deepspeed_train_step_count_and_buffer_formulas(p, m):
    legacy = generate("deepspeed-train", p, m, buffers="legacy", order="legacy")
    assert legacy.num_steps == 2 * (m + p - 1)
    assert legacy.buffers == tuple(max(2, min(p - s + 1, m)) for s in range(p))
    fixed = generate("deepspeed-train", p, m)
    assert fixed.buffers == tuple(max(2, min(p - s, m)) for s in range(p))
    assert generate("deepspeed-inference", p, m).num_steps == m + p - 1


@pytest.mark.parametrize(
    ("p", "m", "advice"),
    [(4, 3, "use 4"), (4, 1, "use 4"), (4, 6, "use 4 or 8"), (3, 10, "use 9 or 12")],
)
def test_interleaved_refusal_names_each_nearest_multiple_once(p, m, advice):
    with pytest.raises(InputError) as refused:
        generate("interleaved-1f1b", p, m, chunks=2)
    assert str(refused.value).endswith(f"multiple of stages: {advice}")


def test_interleaved_order_matches_megatron_warmup():
    orders = interleaved_orders(4, 8, 2)
    for r, order in enumerate(orders):
        warm = (4 - r - 1) * 2 + 4
        assert all(k == Kind.FORWARD for k, _, _ in order[:warm])
        assert order[warm + 1][0] == Kind.BACKWARD


@FAST
@given(
    st.integers(2, 6),
    st.integers(2, 16),
    st.floats(0.01, 3),
    st.sampled_from(["1f1b", "deepspeed-train", "zb-h1"]),
)
def test_per_rank_costs_slow_only_that_rank_and_agree_with_the_reference(p, m, slow_send, kind):
    s = build(kind, p, m)
    model = str(s.params["p2p"])
    base = Costs(send=0.01, recv=0.01)
    slow = base.with_rank(0, send=slow_send)
    matching = match(s)
    tl = simulate(s, matching, slow, model)
    ref = run(s, matching.partner, slow.row_costs(s), 0.0, model)
    np.testing.assert_allclose(tl.end, ref.end, rtol=1e-9, atol=1e-9)
    sends0 = (s.rank == 0) & np.isin(s.kind, (Kind.SEND_ACTIVATION, Kind.SEND_GRAD))
    assert np.allclose(slow.row_costs(s)[sends0], slow_send)
    assert tl.makespan >= simulate(s, matching, base, model).makespan - 1e-9


def test_the_bubble_has_no_ratio_to_ideal_compute_when_nothing_computes():
    """(makespan - mean busy) / mean busy with every compute cost 0 is 16 / 0: no number, not the
    0.0% it was printed as beside a bubble of 100% of the time."""
    from explorer.pipeline.printout.listing import summary

    free = Costs.of({f: 0.0 for f in ("forward", "backward", "backward_input", "backward_weight")})
    report = check(build("1f1b", 4, 8), free)
    bubble = report.timeline.bubble
    assert bubble.of_ideal is None and bubble.to_dict()["fraction_of_ideal"] is None
    assert "no ratio to ideal compute time" in summary(report)
    assert check(build("1f1b", 4, 8)).timeline.bubble.of_ideal == pytest.approx(3 / 8)


@pytest.mark.parametrize(
    ("args", "options", "words"),
    [
        ((4, 8), {"buffers": [1, 2, 3, 4.5]}, "buffer counts are whole numbers; got 4.5"),
        ((4, 8), {"buffers": float("nan")}, "buffers is a whole number, one per stage"),
        ((4, 8), {"buffers": True}, "buffers is a whole number, one per stage"),
        ((10**6, 10**6), {}, "more than the limit of 1,024"),
        ((64, 10**7), {}, "micro-batches is more than the limit"),
    ],
)
def test_the_library_refuses_what_the_cli_refuses(args, options, words):
    """``build`` once cut 4.5 buffers to 4, raised TypeError on nan and ran out of memory on a
    million stages; it says what to change, as the options do."""
    with pytest.raises(InputError, match=words):
        build("1f1b", *args, **options)


def test_the_library_takes_numpys_integers_for_sizes():
    assert build("1f1b", np.int64(4), np.int32(8)).num_stages == 4
