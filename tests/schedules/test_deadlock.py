"""Deadlocks under blocking (DeepSpeed) and batched (PyTorch) P2P, pinned to stage and step."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.pipeline.analysis import build, check, find_deadlock, match
from explorer.pipeline.analysis.deadlock import _stuck_rows, stuck_heads, walk_heads
from explorer.pipeline.analysis.p2p_models import deadlock_from_heads, dependency_steps_ok
from explorer.pipeline.analysis.reference import run
from explorer.pipeline.schedules import Kind, from_streams, generate
from tests.schedules.strategies import schedule_args


def mixed_order_schedule():
    """DeepSpeed today, except stage 1 keeps the legacy send/recv order: the pairs cross."""
    fixed = generate("deepspeed-train", 4, 8, buffers="fixed", order="fixed").streams()
    legacy = generate("deepspeed-train", 4, 8, buffers="fixed", order="legacy").streams()
    fixed[1] = legacy[1]
    return from_streams(fixed, num_microbatches=8, buffers=[4, 3, 2, 2], params={"p2p": "blocking"})


def test_crossed_pairs_deadlock_under_blocking_but_not_batched_p2p():
    s = mixed_order_schedule()
    report = check(s)
    dl = report.findings.deadlock
    assert dl is not None and dl.model == "blocking"
    cycle = {(w.at.stage, w.waits_for_stage) for w in dl.cycle}
    assert cycle == {(1, 2), (2, 1)}
    # Step 6 is stage 1's first backward step: legacy order sends the activation first, while
    # stage 2 (fixed order) first sends the gradient back. Each waits for the other.
    by_stage = {w.at.stage: w for w in dl.cycle}
    assert by_stage[1].at.step == by_stage[2].at.step == 6
    assert by_stage[1].at.deepspeed_repr == "SendActivation(buffer_id=2)"
    assert by_stage[2].at.deepspeed_repr == "SendGrad(buffer_id=0)"
    # The neighbours stop one step later, waiting on the stages inside the cycle.
    stuck = {w.at.stage: (w.at.step, w.waits_for_stage) for w in dl.stuck}
    assert stuck[0] == (7, 1) and stuck[3] == (7, 2)
    assert report.timeline is None and not report.ok
    assert report.findings.deadlocks["batched"] is None
    assert "deadlock under blocking P2P" in dl.describe()


def test_missing_send_is_unmatched_and_stalls_the_receiver():
    streams = generate("1f1b", 3, 4).streams()
    streams[0] = [
        [i for i in step if not (i.kind == Kind.SEND_ACTIVATION and i.microbatch == 2)]
        for step in streams[0]
    ]
    report = check(from_streams(streams, num_microbatches=4))
    assert [(u.stage, u.at.deepspeed_repr) for u in report.findings.unmatched] == [
        (1, "RecvActivation(buffer_id=3)")
    ]  # FIFO: the last receive is left over
    # FIFO: the next send now meets the receive that expected micro-batch 2.
    assert any(
        m.expected_microbatch == 2 and m.sent_microbatch == 3 for m in report.findings.mismatched
    )
    dl = report.findings.deadlocks["batched"]
    assert dl is not None and any(w.at.stage == 1 for w in dl.stuck)


@settings(max_examples=80, deadline=None)
@given(
    schedule_args(max_stages=5, max_microbatches=10),
    st.sampled_from(["blocking", "batched"]),
    st.data(),
)
def test_fast_search_agrees_with_the_step_by_step_engine_on_perturbed_schedules(args, model, data):
    kind, p, m, v = args
    s = build(kind, p, m, chunks=v)
    # Swap two instructions inside one (rank, step): a plausible hand edit of a schedule.
    same = np.nonzero((s.rank[1:] == s.rank[:-1]) & (s.step[1:] == s.step[:-1]))[0]
    if len(same):
        i = int(data.draw(st.sampled_from(same.tolist())))
        cols = {c: getattr(s, c).copy() for c in ("kind", "stage", "microbatch", "buffer")}
        for c in cols.values():
            c[[i, i + 1]] = c[[i + 1, i]]
        s = s.replace(**cols)
    matching = match(s)
    fast = find_deadlock(s, matching, model)
    slow = run(s, matching.partner, np.zeros(len(s)), 0.0, model)
    assert (fast is None) == (not slow.heads)
    if fast is not None:
        assert {w.at.index for w in fast.stuck} == set(slow.heads.values())


def _edited(s, data):
    """``s`` with one plausible hand edit: two neighbouring rows swapped (inside a step, or
    across a step boundary of one rank, which can leave a wait pointing to a later step), or
    one exchange dropped (its partner is then unmatched)."""
    edit = data.draw(st.sampled_from(["swap-in-step", "swap-across-steps", "drop", "none"]))
    cols = {c: getattr(s, c).copy() for c in ("rank", "step", "kind", "stage", "microbatch")}
    cols["buffer"] = s.buffer.copy()
    same_rank = s.rank[1:] == s.rank[:-1]
    in_step = same_rank & (s.step[1:] == s.step[:-1])
    exchange = np.isin(
        s.kind, [Kind.SEND_ACTIVATION, Kind.SEND_GRAD, Kind.RECV_ACTIVATION, Kind.RECV_GRAD]
    )
    candidates = {
        "swap-in-step": np.nonzero(in_step)[0],
        "swap-across-steps": np.nonzero(same_rank & ~in_step)[0],
        "drop": np.nonzero(exchange)[0],
    }.get(edit, np.zeros(0, dtype=int))
    if not len(candidates):
        return s
    i = int(data.draw(st.sampled_from(candidates.tolist())))
    if edit == "drop":
        keep = np.arange(len(s)) != i
        return s.replace(**{c: v[keep] for c, v in cols.items()})
    for c in ("kind", "stage", "microbatch", "buffer"):  # rank and step stay: rows stay sorted
        cols[c][[i, i + 1]] = cols[c][[i + 1, i]]
    return s.replace(**{c: cols[c] for c in ("kind", "stage", "microbatch", "buffer")})


@settings(max_examples=150, deadline=None)
@given(
    schedule_args(max_stages=6, max_microbatches=12),
    st.sampled_from(["blocking", "batched"]),
    st.data(),
)
def test_deadlock_record_equals_the_reference_walks_on_edited_schedules(args, model, data):
    """Both fast ways to each rank's stopping point - the fixed point over the rows stuck
    inside their step, and the zero-cost walk that reads each stream only as far as its rank
    gets - give exactly the reference simulator's heads, and so the same Deadlock record."""
    kind, p, m, v = args
    s = _edited(build(kind, p, m, chunks=v), data)
    partner = match(s).partner
    slow = run(s, partner, np.zeros(len(s)), 0.0, model).heads
    assert walk_heads(s, partner, model) == slow
    # the search the check runs: a send left without its receive stops the walk under batched
    # P2P too (the batch's wait never returns), and the search once let it pass
    found = find_deadlock(s, match(s), model)
    assert (found is None) == (not slow), (found, slow)
    assert found is None or {w.at.index for w in found.stuck} == set(slow.values())
    if dependency_steps_ok(s, partner, model):
        stuck = _stuck_rows(s, partner, model)
        if stuck.any():
            assert stuck_heads(s, partner, model, stuck) == slow
    fast = find_deadlock(s, match(s), model)
    expected = deadlock_from_heads(s, partner, slow, model) if slow else None
    if fast is not None or not dependency_steps_ok(s, partner, model):
        assert fast == expected
    elif slow:
        # The step-wise search leaves a batched send without a receive to the unmatched
        # findings; the walk stops there (and ranks that wait for that rank stop later).
        sends = (Kind.SEND_ACTIVATION, Kind.SEND_GRAD)
        assert model == "batched"
        assert any(s.kind[row] in sends and partner[row] < 0 for row in slow.values())


def test_a_send_nobody_receives_is_a_deadlock_under_batched_p2p_too():
    """An export cut after rank 0's rows: its SendActivation has no stage to go to. Under
    blocking P2P the check named the deadlock; under batched it raised a traceback, because the
    search let the send pass where the simulator's walk stopped."""
    from explorer.pipeline.schedules.io import from_csv

    s = from_csv(
        "rank,step,slot,stage,instruction,kind,microbatch,buffer\n"
        "0,0,0,0,0L0b0,LoadMicroBatch,0,0\n0,0,1,0,0F0b0,ForwardPass,0,0\n"
        "0,0,2,0,0SA0b0,SendActivation,0,0\n0,1,0,0,0L1b1,LoadMicroBatch,1,1\n"
    )
    for model in ("blocking", "batched"):
        report = check(s, model=model)
        stuck = report.findings.deadlocks[model]
        assert not report.ok and stuck is not None, model
        assert [w.at.text for w in stuck.stuck] == ["0SA0b0"], model
