"""The cross-rank analyses on records made by hand: pure logic, so a fake measurement is enough here."""

from __future__ import annotations

import pytest

from explorer.pipeline.analysis.measured import (
    bubble,
    critical_path,
    measured_bubble,
    summary,
    waits,
)
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.trace import to_measured


def _rec(rank, stage, kind, mb, start, end, wait=0.0, action=None):
    code = {"F": "F", "B": "B", "SA": "SEND_F", "SG": "SEND_B"}[kind]
    return {
        "rank": rank,
        "stage": stage,
        "kind": kind,
        "microbatch": mb,
        "action": action or f"{stage}{code}{mb}",
        "start": start,
        "end": end,
        "wait": wait,
        "arrived": start + wait if wait else None,
    }


# Two ranks, one micro-batch: rank 1's forward waits 2 ms, 0.5 of it after rank 0 sent.
ROWS = MeasuredTrace.from_records(
    [
        _rec(0, 0, "F", 0, 0.000, 0.0015),
        _rec(0, 0, "SA", 0, 0.0015, 0.0016),
        _rec(1, 1, "F", 0, 0.0000, 0.0030, wait=0.0020),
        _rec(1, 1, "B", 0, 0.0030, 0.0040),
        _rec(1, 1, "SG", 0, 0.0040, 0.0041),
        _rec(0, 0, "B", 0, 0.0016, 0.0060, wait=0.0030),
    ]
)


def test_waits_split_into_waiting_and_transfer():
    w = {x["action"]: x for x in waits(ROWS)}
    f = w["1F0"]
    assert f["from_rank"] == 0 and f["from_action"] == "0SEND_F0"
    assert f["waiting"] == pytest.approx(0.0015) and f["transfer"] == pytest.approx(0.0005)
    b = w["0B0"]  # needed at 1.6 ms, sent at 4.0 ms, arrived at 4.6 ms
    assert b["waiting"] == pytest.approx(0.0024) and b["transfer"] == pytest.approx(0.0006)


def test_critical_path_crosses_ranks_and_says_so():
    path = critical_path(ROWS)
    assert [s["action"] for s in path["steps"]] == ["0F0", "1F0", "1B0", "0B0"]
    assert [s["via"] for s in path["steps"]] == ["start", "receive", "rank", "receive"]
    assert path["sentences"] == [
        "rank 1's 1F0 waited 2 ms for rank 0's send of micro-batch 0 (0SEND_F0)",
        "rank 0's 0B0 waited 3 ms for rank 1's send of micro-batch 0 (1SEND_B0)",
    ]
    assert summary(path).startswith("critical path: 4 computes, 6 ms, ranks 0 -> 1 -> 0")


def test_bubble_both_denominators():
    b = {x["rank"]: x for x in bubble(ROWS)}
    assert b[0]["compute_s"] == pytest.approx(0.0015 + 0.0014)
    assert b[0]["share_of_iteration"] == pytest.approx((0.006 - 0.0029) / 0.006)
    assert b[1]["share_of_compute"] == pytest.approx((0.006 - 0.002) / 0.002)


def test_the_iterations_bubble_is_the_ranks_compute_over_ranks_times_makespan():
    """One number for the iteration, from the same compute seconds as the per-rank bubble."""
    per_rank = bubble(ROWS)
    compute = sum(x["compute_s"] for x in per_rank)
    assert measured_bubble(ROWS) == pytest.approx(1 - compute / (2 * 0.006))
    assert measured_bubble(ROWS) == pytest.approx(
        sum(x["share_of_iteration"] for x in per_rank) / len(per_rank)
    )
    assert measured_bubble(MeasuredTrace.from_records([])) == 0.0


def test_explorer_runs_records_name_their_kind_in_text():
    """``explorer run`` writes ``text`` (``0F0``), not a kind code: the bubble reads it the same."""
    runs = to_measured(
        [
            {"rank": 0, "stage": 0, "text": "0F0", "microbatch": 0, "start": 0.0, "end": 0.002},
            {"rank": 0, "stage": 0, "text": "0SA0", "microbatch": 0, "start": 0.002, "end": 0.003},
            {"rank": 1, "stage": 1, "text": "1RA0", "microbatch": 0, "start": 0.0, "end": 0.003},
            {"rank": 1, "stage": 1, "text": "1F0", "microbatch": 0, "start": 0.003, "end": 0.004},
        ]
    )
    b = {x["rank"]: x for x in bubble(runs)}
    assert b[0]["compute_s"] == pytest.approx(0.002) and b[1]["compute_s"] == pytest.approx(0.001)
    assert measured_bubble(runs) == pytest.approx(1 - 0.003 / (2 * 0.004))
