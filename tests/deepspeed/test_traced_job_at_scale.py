"""A DeepSpeed job of data-parallel replicas traced by ``explorer.instrument``, read as a job.

DeepSpeed numbers a pipeline job's ranks pipe-major (``PipeDataParallelTopology``: rank = stage
x replicas + replica), not as ``explorer run``'s copies. A real job of 2 stages x 2 replicas is
started by torchrun (``tests/data/deepspeed_user_job.py --stages 2``, DeepSpeed 0.19.8's engine on
gloo): its start lines say the stages, the world size and each rank's replica, and ``explorer
read`` lays it out from them. Then that job's replica 0 is replicated the way DeepSpeed numbers a
larger job (``tests/replicated_job.py``), stragglers planted, and read back.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from built_once import built_once
from deepspeed_runs import explorer_cli
from replicated_job import replicate
from test_instrument import torchrun

from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold import fold
from explorer.pipeline.schedules.instructions import KIND_BY_CODE
from explorer.pipeline.traces.job import read_job
from explorer.pipeline.traces.job_folder import PIPE_MAJOR

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """A real DeepSpeed job: 4 ranks, 2 stages, 2 data-parallel replicas, traced (once per run:
    the module's tests may fall on both xdist workers)."""
    return built_once(tmp_path_factory, "deepspeed-traced-2x2", lambda: _traced(tmp_path_factory))


def _traced(tmp_path_factory):
    import os

    from deepspeed_runs import ROOT

    folder = tmp_path_factory.mktemp("dp") / "trace"
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    run_env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    job = torchrun(folder, "--stages", "2", "--iterations", "3", env=run_env)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-2000:]
    return folder, run_env


def test_deepspeeds_own_numbering_is_read_from_the_ranks_start_lines(traced, tmp_path):
    folder, run_env = traced
    job = read_job(folder)
    lay = job.layout
    assert (lay.order, lay.replicas, lay.pipeline_ranks, lay.ranks) == (PIPE_MAJOR, 2, 2, 4)
    assert job.unread == ()
    # rank 1 runs stage 0 of replica 1, rank 2 stage 1 of replica 0: each rank's lines agree
    for rank in range(4):
        assert set(job.stage[job.rank == rank].tolist()) == {rank // 2}
    # messages pair within a replica only: ranks 0-2 and 1-3, each bounded against its first rank
    clocked = clocks(job)
    assert clocked.messages > 0 and clocked.contradicted == {}
    assert clocked.reference.tolist() == [0, 1, 0, 1]
    assert np.isfinite(clocked.low[[2, 3]]).all() and np.isfinite(clocked.high[[2, 3]]).all()
    done = explorer_cli(["read", str(folder), "--json"], run_env, tmp_path)
    doc = json.loads(done.stdout)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert doc["kind"] == "pipeline-job" and doc["layout"].startswith("rank = the schedule's rank")
    # the path stays in its replica and starts on its stage 0; whether it ever crosses to stage
    # 1 is the machine's timing (a stage 0 that is always the later one holds the whole path)
    path = doc["critical_path"]
    replica_ranks = {path["replica"], 2 + path["replica"]}
    assert path["hops"][0] == path["replica"]
    assert set(path["hops"]) <= replica_ranks
    assert {s["rank"] for s in path["steps"] if s["via"] == "message"} <= replica_ranks


def test_a_larger_job_numbered_as_deepspeed_does_names_its_stragglers(traced, tmp_path):
    folder, run_env = traced
    truth = replicate(folder, tmp_path / "job", replicas=24, from_iteration=1, seed=3)
    assert truth.order == "pipe-major"
    job = read_job(tmp_path / "job")
    assert (job.layout.order, job.layout.ranks) == (PIPE_MAJOR, 48)
    found = {(o.rank, o.stage, o.replica, o.kind, o.peer) for o in fold(job).outliers}
    planted = {(s.rank, s.stage, s.replica, KIND_BY_CODE[s.kind], s.peer) for s in truth.stragglers}
    assert found == planted
    # DeepSpeed's numbers: the slow link's peer is the same replica's stage 0, rank = replica
    link = truth.stragglers[1]
    assert link.rank == 24 + link.replica and link.peer == link.replica
    done = explorer_cli(["read", str(tmp_path / "job")], run_env, tmp_path)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert f"rank {link.rank}, stage 1 replica {link.replica}: its activation" in done.stdout
    assert f"the link from rank {link.peer}" in done.stdout
