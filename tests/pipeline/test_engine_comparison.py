"""Engines compared on what they measured: pure logic over results, so results made by hand are
enough here (the real engines side by side are ``test_pipeline_torch_engine.py`` and
``tests/deepspeed/test_deepspeed_engine.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from explorer.pipeline.analysis.engines import ThreeEngines, side_by_side
from explorer.pipeline.analysis.measured import milliseconds_by_kind
from explorer.pipeline.printout.engines import side_by_side_table
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.trace import to_measured


def _ours(losses, digest="d", *, iteration=1):
    """An ``explorer run``-shaped result: records name their instruction in ``text``."""
    records = [
        {"iteration": 0, "rank": 0, "text": "0F0", "start": 0.0, "end": 0.5},  # warm-up: left out
        {"iteration": iteration, "rank": 0, "text": "0F0", "start": 1.0, "end": 1.002},
        {"iteration": iteration, "rank": 0, "text": "0SA0", "start": 1.002, "end": 1.003},
        {"iteration": iteration, "rank": 1, "text": "1RA0", "start": 1.0, "end": 1.003},
        {"iteration": iteration, "rank": 1, "text": "1F0", "start": 1.003, "end": 1.007},
    ]
    records = [{"stage": r["rank"], "microbatch": 0, **r} for r in records]
    return SimpleNamespace(
        ok=True,
        records=records,
        trace=lambda: to_measured(records).of_iteration(),
        losses=losses,
        bitwise_equal_to_reference=True,
        digest=digest,
        failure=None,
    )


def _torch(losses, *, within_tolerance=True):
    """A PyTorch-shaped result: profiler rows carry a kind code."""
    rows = [
        {"rank": 0, "kind": "F", "iteration": 1, "start": 0.0, "end": 0.001, "wait": 0.0},
        {"rank": 1, "kind": "F", "iteration": 1, "start": 0.001, "end": 0.004, "wait": 0.002},
    ]
    rows = [{"stage": r["rank"], "microbatch": 0, **r} for r in rows]
    return SimpleNamespace(
        ok=True,
        records=rows,
        losses=losses,
        bitwise_equal_to_reference=False,
        within_tolerance=within_tolerance,
        digest="t",
        failure=None,
        trace=lambda: MeasuredTrace.from_records(rows),
        makespan=lambda: 0.004,
    )


def test_durations_by_kind_read_either_record_shape():
    ours = milliseconds_by_kind(_ours([1.0]).trace())
    assert ours["F"] == pytest.approx([2.0, 4.0]) and ours["SA"] == pytest.approx([1.0])
    assert milliseconds_by_kind(_torch([1.0]).trace())["F"] == pytest.approx([1.0, 3.0])


def test_three_engines_side_by_side_per_kind_and_why_torch_may_differ():
    losses = [1.0, 2.0, 3.0]  # M = 3: not a power of two
    side = side_by_side(_ours(losses), _torch(losses), _ours(losses))
    rows = {r["kind"]: r for r in side["kinds"]}
    assert rows["F"]["explorer_n"] == 2 and rows["F"]["torch_n"] == 2  # the last iteration only
    assert rows["F"]["explorer_mean_ms"] == pytest.approx(3.0)
    assert rows["RA"]["torch_n"] == 0 and rows["RA"]["torch_mean_ms"] is None
    assert side["makespan_ms"]["explorer"] == pytest.approx(7.0)
    assert side["makespan_ms"]["torch"] == pytest.approx(4.0)
    assert side["explorer_and_deepspeed_bitwise_equal"] is True
    assert "M=3" in side["why_torch_may_differ"]
    assert (
        side_by_side(_ours([1.0] * 4), _torch([1.0] * 4), _ours([1.0] * 4))["why_torch_may_differ"]
        is None
    )
    text = side_by_side_table(side)
    assert "makespan ms: explorer 7.000, torch 4.000, deepspeed 7.000" in text
    assert text.splitlines()[-1] == side["why_torch_may_differ"]


def test_three_engines_pass_only_when_each_matches_the_reference():
    losses = [1.0, 2.0]
    assert ThreeEngines(_ours(losses), _torch(losses), _ours(losses)).passed
    assert not ThreeEngines(
        _ours(losses), _torch(losses, within_tolerance=False), _ours(losses)
    ).passed
    differs = _ours(losses)
    differs.bitwise_equal_to_reference = False
    assert not ThreeEngines(_ours(losses), _torch(losses), differs).passed
