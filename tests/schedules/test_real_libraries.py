"""Adapters against the real libraries: DeepSpeed's schedule module and PyTorch's pipelining orders.

DeepSpeed 0.19.8 (installed by ``make install``) ships the fixed TrainSchedule. DeepSpeed 0.8.1
(the release the seed was written against) is read from its source distribution on the
registry; its schedule module is imported under the installed package, so its one relative
import (``call_to_str``) resolves to real DeepSpeed code.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from deepspeed_081 import import_schedule_081, without_plus_one

from explorer.pipeline.analysis import build, check
from explorer.pipeline.schedules.adapters import from_deepspeed, from_torch_pipelining

deepspeed_schedule = pytest.importorskip(
    "deepspeed.runtime.pipe.schedule", reason="make install provides deepspeed"
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def deepspeed_081_schedule(tmp_path_factory):
    """DeepSpeed 0.8.1's ``deepspeed/runtime/pipe/schedule.py``, as shipped (before the fix)."""
    return import_schedule_081(tmp_path_factory.mktemp("ds081"))


def test_deepspeed_081_as_shipped_is_our_legacy_schedule_and_is_clean(deepspeed_081_schedule):
    ours = build("deepspeed-train", 4, 8, buffers="legacy", order="legacy")
    theirs = from_deepspeed(deepspeed_081_schedule.TrainSchedule, 4, 8)
    assert theirs.same_instructions(ours)
    assert (theirs.step_labels == ours.step_labels).all()
    assert check(theirs).ok


def test_deepspeed_081_without_plus_one_has_the_seed_hazard(deepspeed_081_schedule):
    report = check(from_deepspeed(without_plus_one(deepspeed_081_schedule.TrainSchedule), 4, 8))
    assert not report.ok
    first = min((h for h in report.findings.hazards if h.stage == 2), key=lambda h: h.step)
    assert (first.step, first.at.deepspeed_repr, first.overwritten_by.deepspeed_repr) == (
        6,
        "SendGrad(buffer_id=0)",
        "RecvActivation(buffer_id=0)",
    )
    assert report.buffers.allocated[2] == 2 and report.buffers.needed[2] == 3


@pytest.mark.parametrize("p,m", [(2, 2), (4, 8), (5, 3), (8, 32)])
def test_deepspeed_today_equals_our_fixed_schedule_and_is_clean(p, m):
    theirs = from_deepspeed(deepspeed_schedule.TrainSchedule, p, m)
    assert theirs.same_instructions(build("deepspeed-train", p, m, buffers="fixed", order="fixed"))
    assert check(theirs).ok
    assert check(from_deepspeed(without_plus_one(deepspeed_schedule.TrainSchedule), p, m)).ok
    inference = from_deepspeed(deepspeed_schedule.InferenceSchedule, p, m)
    assert inference.same_instructions(build("deepspeed-inference", p, m))


def test_torch_gpipe_order_is_valid_and_times_like_ours():
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    order = pipeline_order("ScheduleGPipe", 4, 8)
    report = check(from_torch_pipelining(order))
    assert report.ok
    assert report.timeline.makespan == check(build("gpipe", 4, 8)).timeline.makespan


def test_torch_interleaved_order_is_valid():
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    schedule = from_torch_pipelining(pipeline_order("ScheduleInterleaved1F1B", 4, 8, chunks=2))
    assert schedule.num_stages == 8 and schedule.stage_to_rank == (0, 1, 2, 3, 0, 1, 2, 3)
    assert check(schedule).ok


def test_torch_1f1b_order_verdict_follows_its_content():
    """torch 2.9's Schedule1F1B order omits the last rank's F0; the analysis must say so."""
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    order = pipeline_order("Schedule1F1B", 4, 8)
    last = [str(a) for a in order[3] if a is not None]
    report = check(from_torch_pipelining(order, num_microbatches=8))
    if "3F0" in last:
        assert report.ok
    else:
        assert not report.ok
        words = " ".join(f.describe() for f in report.findings.all())
        assert "stage 3" in words and "micro-batch 0" in words


@pytest.mark.parametrize("p,m", [(2, 4), (3, 7), (4, 8), (4, 13)])
def test_our_dualpipev_is_pytorchs_order_and_both_time_alike(p, m):
    """PyTorch's ScheduleDualPipeV order (overlapped pairs run one after the other) is ours."""
    import numpy as np

    from explorer.pipeline.analysis import Costs, match
    from explorer.pipeline.analysis.reference import run
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    theirs = from_torch_pipelining(
        pipeline_order("ScheduleDualPipeV", p, m, chunks=2), num_microbatches=m
    )
    ours = build("dualpipev", p, m)

    def compute(s):
        rows = np.isin(s.kind, [1, 2, 3, 4])
        return [
            list(
                zip(
                    s.kind[rows & (s.rank == r)].tolist(),
                    s.stage[rows & (s.rank == r)].tolist(),
                    s.microbatch[rows & (s.rank == r)].tolist(),
                )
            )
            for r in range(s.num_ranks)
        ]

    assert compute(theirs) == compute(ours)
    assert theirs.stage_to_rank == ours.stage_to_rank
    # PyTorch's time grid is not unit-time ASAP, so some waits cross steps and some stay inside
    # one: the fast timeline must still agree with the step-by-step engine.
    costs = Costs(p2p=0.25)
    report = check(theirs, costs)
    assert report.ok
    ref = run(
        theirs,
        match(theirs).partner,
        costs.by_kind()[theirs.kind.astype(np.int64)],
        0.25,
        "batched",
    )
    np.testing.assert_allclose(report.timeline.end, ref.end)
