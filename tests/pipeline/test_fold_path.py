"""The slowest replica's critical path, on columns whose every time is chosen (pure, fast tier).

Replicas of a 2-stage pipeline, one micro-batch: stage 0 runs F, sends; stage 1 receives, runs
F then B, sends the gradient; stage 0 receives it and runs B. The path of the replica that took
longest must run F(0) -> send -> receive -> F(1) -> B(1) -> send -> receive -> B(0) when the
receives waited for their data, and stay on a rank whose own work held it up.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_scale_fold import job_of_rows

from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold_path import folded_path
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace

F, B = Kind.FORWARD, Kind.BACKWARD
SA, RA, SG, RG = Kind.SEND_ACTIVATION, Kind.RECV_ACTIVATION, Kind.SEND_GRAD, Kind.RECV_GRAD


def _replica(replica: int, slow_b1: float = 1.0, late_post: bool = False, clock: float = 0.0):
    """Rows (rank, stage, iteration, kind, mb, start, end) of one replica (ms in, s out).

    ``late_post``: stage 1 loads its own input until 1.5 ms, after stage 0's send (1.0 ms), and
    only then posts its receive. ``clock``: stage 1's clock reads that many ms late."""
    r0, r1 = 2 * replica, 2 * replica + 1
    b1 = 2.0 * slow_b1
    arrived = 1.6 if late_post else 1.2
    rows = [(r1, 1, 0, Kind.LOAD, -1, 0.0, 1.5)] if late_post else []
    rows += [
        (r0, 0, 0, F, 0, 0.0, 1.0),
        (r0, 0, 0, SA, 0, 1.0, 1.1),
        (r1, 1, 0, RA, 0, 1.5 if late_post else 0.0, arrived),
        (r1, 1, 0, F, 0, arrived, arrived + 1.0),
        (r1, 1, 0, B, 0, arrived + 1.0, arrived + 1.0 + b1),
        (r1, 1, 0, SG, 0, arrived + 1.0 + b1, arrived + 1.1 + b1),
        (r0, 0, 0, RG, 0, 1.1, arrived + 1.2 + b1),
        (r0, 0, 0, B, 0, arrived + 1.2 + b1, arrived + 3.2 + b1),
    ]
    late = {r1: clock, r0: 0.0}
    return [
        (r, s, i, int(k), m, (a + late[r]) / 1e3, (e + late[r]) / 1e3)
        for r, s, i, k, m, a, e in rows
    ]


def _job(*replicas) -> JobTrace:
    return job_of_rows([row for rep in replicas for row in rep], 2 * len(replicas))


def codes(path) -> list[tuple[int, str]]:
    return [(int(r), Kind(int(k)).code) for r, k in zip(path.rank, path.kind)]


def test_the_path_runs_through_the_slowest_replica_and_across_its_messages():
    job = _job(_replica(0), _replica(1, slow_b1=1.5))
    path = folded_path(job, clocks(job))
    assert path is not None and path.replica == 1
    assert codes(path) == [
        (2, "F"),
        (2, "SA"),
        (3, "RA"),
        (3, "F"),
        (3, "B"),
        (3, "SG"),
        (2, "RG"),
        (2, "B"),
    ]
    assert path.via_message.tolist() == [False, False, True, False, False, False, True, False]
    assert path.length_s == pytest.approx(path.step_s) == pytest.approx(7.4e-3)
    # each step holds the path from the previous step's end to its own: the receives hold only
    # the transfer after their send, never the time they spent waiting beside it
    held = path.held_s()
    assert held[3] == pytest.approx((0.1 + 1.0 + 3.0 + 0.1) * 1e-3)
    assert held[2] == pytest.approx((1.0 + 0.1 + 0.1 + 2.0) * 1e-3)
    assert sum(held.values()) == pytest.approx(path.length_s) and path.gaps_s < 1e-12
    said = path.sentences(named=(3, 1))
    assert said[0].startswith("critical path: replica 1 (the slowest), iteration 0: 8 instructions")
    assert "through ranks 2 -> 3 -> 2" in said[0]
    assert any(line.startswith("  rank 3 holds ") for line in said)
    assert "  rank 1 is in replica 0: not the slowest" in "\n".join(said)


def test_a_receive_posted_after_its_data_came_stays_on_its_own_rank():
    """Stage 1 did its own work until 1.5 ms, after the send (1.0 ms): the rank, not the data,
    held the receive up, so the path does not cross to stage 0 there."""
    job = _job(_replica(0, late_post=True))
    path = folded_path(job, clocks(job))
    assert path is not None
    assert codes(path)[:3] == [(1, "L"), (1, "RA"), (1, "F")]
    crossings = [codes(path)[i] for i in np.flatnonzero(path.via_message)]
    assert crossings == [(0, "RG")]


def test_clock_offsets_are_taken_out_before_the_walk():
    """Stage 1's clock reads 50 ms late: without the clocks' offsets its receive would look long
    after every send; with them the path is the same as on one clock."""
    plain = folded_path(_job(_replica(0)), clocks(_job(_replica(0))))
    job = _job(_replica(0, clock=50.0))
    late = folded_path(job, clocks(job))
    assert plain is not None and late is not None
    assert codes(late) == codes(plain)
    assert late.length_s == pytest.approx(plain.length_s, abs=2e-4)


def test_an_empty_job_has_no_path():
    empty = _job(_replica(0))
    none = JobTrace(
        empty.layout,
        *(
            getattr(empty, c)[:0]
            for c in ("rank", "stage", "iteration", "kind", "microbatch", "start", "end")
        ),
        unix=empty.unix,
    )
    assert folded_path(none, clocks(none)) is None
