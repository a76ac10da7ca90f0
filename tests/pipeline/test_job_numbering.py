"""One job, numbered two ways: the same verdicts, each rank called by its own number.

``explorer run``'s copies and PyTorch's ``(dp, pp)`` meshes number a job replica-major (rank =
replica x P + pipeline rank); DeepSpeed's ``PipeDataParallelTopology`` numbers it pipe-major
(rank = pipeline rank x D + replica). The fold, the clocks, the critical path and the step
costs must give the same answer on the same instructions whichever numbering the layout says,
naming each rank, replica and peer by the job's own numbers (pure logic, fast tier).
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from test_fold_path import _replica
from test_scale_fold import columns, job_of_rows

from explorer.errors import InputError
from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold import fold
from explorer.pipeline.analysis.fold_path import folded_path
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace
from explorer.pipeline.traces.job_folder import PIPE_MAJOR, REPLICA_MAJOR, instrument_layout
from explorer.read import detect


def renumbered(job: JobTrace) -> tuple[JobTrace, np.ndarray]:
    """The same job numbered pipe-major, and each old rank's new number."""
    lay = job.layout
    old = np.arange(lay.ranks)
    new = lay.local_of(old) * lay.replicas + lay.replica_of(old)
    files = {int(new[r]): path for r, path in lay.files.items()}
    moved = replace(lay, order=PIPE_MAJOR, files=files)
    columns = ("stage", "iteration", "kind", "microbatch", "start", "end")
    out = JobTrace(
        moved,
        new[job.rank].astype(job.rank.dtype),
        *(getattr(job, c) for c in columns),
        unix=job.unix,
    )
    return out, new


def test_the_layout_maps_ranks_both_ways():
    job, new = renumbered(columns(replicas=5))
    lay = job.layout
    assert (lay.replicas, lay.pipeline_ranks, lay.numbering()) == (
        5,
        2,
        "rank = the schedule's rank * replicas + replica",
    )
    assert list(new) == [0, 5, 1, 6, 2, 7, 3, 8, 4, 9]
    ranks = np.arange(10)
    assert np.array_equal(lay.rank_at(lay.replica_of(ranks), lay.local_of(ranks)), ranks)


def test_the_same_outliers_are_named_by_the_jobs_own_numbers():
    slow = {(21, Kind.BACKWARD, it): 1.8 for it in range(2, 6)}
    slow.update({(9, Kind.RECV_ACTIVATION, it): 3.0 for it in range(1, 6)})
    a = columns(replicas=32, slow=slow)
    b, new = renumbered(a)
    found_a, found_b = fold(a).outliers, fold(b).outliers
    assert {(o.rank, o.kind) for o in found_a} == {(21, Kind.BACKWARD), (9, Kind.RECV_ACTIVATION)}
    assert len(found_a) == len(found_b)
    for x, y in zip(sorted(found_a, key=lambda o: o.rank), sorted(found_b, key=lambda o: o.rank)):
        assert (int(new[x.rank]), x.stage, x.replica, x.kind) == (
            y.rank,
            y.stage,
            y.replica,
            y.kind,
        )
        assert y.ratio == pytest.approx(x.ratio)
        assert (x.peer is None) == (y.peer is None)
        if x.peer is not None:
            assert y.peer == int(new[x.peer])
    link = next(o for o in found_b if o.kind == Kind.RECV_ACTIVATION)
    assert f"rank {link.rank}, stage 1 replica 4:" in link.sentence()
    assert f"the link from rank {link.peer}" in link.sentence()


def test_the_same_clocks_and_the_same_critical_path():
    a = job_of_rows(
        [row for r in range(4) for row in _replica(r, slow_b1=1.0 + (r == 2), clock=3.0 * r)], 8
    )
    b, new = renumbered(a)
    ca, cb = clocks(a), clocks(b)
    assert np.allclose(cb.low[new], ca.low) and np.allclose(cb.high[new], ca.high)
    assert np.array_equal(cb.reference[new], new[ca.reference])
    pa, pb = folded_path(a, ca), folded_path(b, cb)
    assert pa is not None and pb is not None and pa.replica == pb.replica == 2
    assert np.array_equal(pb.rank, new[pa.rank]) and np.array_equal(pb.kind, pa.kind)
    assert pb.length_s == pytest.approx(pa.length_s)
    said = "\n".join(pb.sentences(named=(int(new[5]), int(new[1]))))
    assert f"rank {int(new[1])} is in replica 0: not the slowest" in said
    assert f"rank {int(new[5])} holds " in said


# -- how a traced job's folder says its numbering ---------------------------------------------------


def _traced_folder(tmp_path, stages: int, replicas: int, place, run: str = "r1") -> None:
    """Start lines as ``explorer.instrument`` writes them: ``place(rank) -> (stage, replica)``;
    appended, as a job run twice into one folder appends."""
    for rank in range(stages * replicas):
        stage, replica = place(rank)
        start = {
            "type": "start", "rank": rank, "run": run, "stages": [stage], "source": "deepspeed",
            "num_stages": stages, "world_size": stages * replicas,
            "data_parallel_size": replicas, "replica": replica, "unix": 0.0,
        }  # fmt: skip
        with open(tmp_path / f"rank{rank}.jsonl", "a") as fh:
            fh.write(json.dumps(start) + "\n")


def test_a_traced_folder_says_pipe_major_replica_major_or_neither(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    _traced_folder(tmp_path / "a", 4, 8, lambda r: (r // 8, r % 8))  # DeepSpeed's numbering
    _traced_folder(tmp_path / "b", 4, 8, lambda r: (r % 4, r // 4))
    _traced_folder(tmp_path / "c", 4, 8, lambda r: ((r * 7) % 4, r % 8))
    a, b = instrument_layout(tmp_path / "a"), instrument_layout(tmp_path / "b")
    assert a is not None and (a.order, a.replicas, a.stage_to_rank, a.run) == (
        PIPE_MAJOR,
        8,
        (0, 1, 2, 3),
        "r1",
    )
    assert b is not None and (b.order, b.replicas) == (REPLICA_MAJOR, 8)
    with pytest.raises(InputError, match="numbered neither pipe-major"):
        instrument_layout(tmp_path / "c")


def test_a_traced_folder_of_one_pipeline_is_left_to_the_traced_job_reader(tmp_path):
    _traced_folder(tmp_path, 4, 1, lambda r: (r, 0))
    assert instrument_layout(tmp_path) is None
    assert detect(tmp_path).kind == "pipeline-instrumented"


def test_a_folder_a_traced_job_wrote_twice_is_laid_out_as_its_last_run(tmp_path):
    """The first run numbered replica-major, the second pipe-major: the layout is the second's,
    and the lines it keeps are the second run's (the reader leaves the others out)."""
    _traced_folder(tmp_path, 2, 4, lambda r: (r % 2, r // 2), run="first")
    _traced_folder(tmp_path, 2, 4, lambda r: (r // 4, r % 4), run="second")
    lay = instrument_layout(tmp_path)
    assert lay is not None and (lay.run, lay.order) == ("second", PIPE_MAJOR)
