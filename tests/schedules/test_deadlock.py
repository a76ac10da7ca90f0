"""Deadlocks under blocking (DeepSpeed) and batched (PyTorch) P2P, pinned to stage and step."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis import build, check, find_deadlock, match
from explorer.analysis.reference import run
from explorer.schedules import Kind, from_streams, generate
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
