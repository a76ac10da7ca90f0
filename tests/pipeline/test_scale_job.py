"""A job of hundreds of ranks made from one real run: the planted stragglers named, nothing else.

One real 1F1B run of 4 stages (the explorer's engine on gloo) is recorded for the module; each
test replicates it into a job with known offsets, jitter and stragglers
(``tests/replicated_job.py``, the generator of ``benchmarks/scale_job.py``) and reads it back
through ``explorer read``.
"""

from __future__ import annotations

import json
import shutil

import pytest
from replicated_job import TRUTH, replicate

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.fold import fold
from explorer.pipeline.runtime import RunSpec, run_pipeline
from explorer.pipeline.schedules.instructions import KIND_BY_CODE
from explorer.pipeline.traces.job import read_job

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real run folder: 1F1B, 4 stages, 8 micro-batches, 3 iterations."""
    folder = tmp_path_factory.mktemp("recorded")
    result = run_pipeline(RunSpec.for_schedule(build("1f1b", 4, 8), iterations=3), folder)
    assert result.ok
    return folder


def named(outliers) -> set[tuple]:
    return {(o.rank, o.stage, o.replica, o.kind, o.first_iteration) for o in outliers}


def planted(truth) -> set[tuple]:
    return {
        (s.rank, s.stage, s.replica, KIND_BY_CODE[s.kind], s.from_iteration)
        for s in truth.stragglers
    }


def test_planted_stragglers_are_named_with_rank_stage_and_replica(recorded, tmp_path, explorer_cli):
    truth = replicate(recorded, tmp_path / "job", replicas=48, from_iteration=1, seed=3)
    job = read_job(tmp_path / "job")
    assert (job.layout.ranks, job.layout.replicas, job.unread) == (192, 48, ())
    folded = fold(job)
    assert named(folded.outliers) == planted(truth)
    slow, link = sorted(folded.outliers, key=lambda o: o.kind)
    assert slow.ratio == pytest.approx(1.8, rel=0.1) and slow.to_the_end
    assert link.peer == truth.stragglers[1].peer and link.added_s == pytest.approx(0.02, rel=0.25)
    out = explorer_cli("read", str(tmp_path / "job"), "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["kind"] == "pipeline-job" and doc["ranks"] == 192
    s = truth.stragglers[0]
    assert any(
        o["sentence"].startswith(
            f"rank {s.rank}, stage {s.stage} replica {s.replica}: its backward"
        )
        for o in doc["outliers"]
    )


def test_unperturbed_copies_name_no_one_even_with_jitter(recorded, tmp_path, explorer_cli):
    replicate(recorded, tmp_path / "job", replicas=64, stragglers=[], jitter=0.08, seed=5)
    assert fold(read_job(tmp_path / "job")).outliers == ()
    out = explorer_cli("read", str(tmp_path / "job"))
    assert out.returncode == 0 and "outliers: none" in out.stdout and "256 ranks" in out.stdout


def test_a_broken_job_gives_a_partial_answer_naming_what_it_could_not_read(
    recorded, tmp_path, explorer_cli
):
    job = tmp_path / "job"
    truth = replicate(recorded, job, replicas=16, seed=7)
    stragglers = {s.rank for s in truth.stragglers}
    cut, foreign, gone = [r for r in (5, 9, 13, 17, 21, 25) if r not in stragglers][:3]
    data = (job / f"rank{cut}.jsonl").read_bytes()
    (job / f"rank{cut}.jsonl").write_bytes(data[: len(data) // 2])  # killed mid-line
    other = tmp_path / "other"
    replicate(recorded, other, replicas=4, seed=8)
    text = (other / f"rank{foreign % 4}.jsonl").read_text().replace(truth_run(job), "another-run")
    (job / f"rank{foreign}.jsonl").write_text(
        text.replace(f'"rank": {foreign % 4},', f'"rank": {foreign},')
    )
    (job / f"rank{gone}.jsonl").unlink()
    shutil.move(job / TRUTH, tmp_path / TRUTH)

    folded = fold(read_job(job))
    assert named(folded.outliers) == planted(truth)
    out = explorer_cli("read", str(job))
    assert out.returncode == 1, out.stderr
    assert f"rank {cut}: line " in out.stdout and "is not a JSON record (cut short?)" in out.stdout
    assert f"rank {foreign}: written by another run (another-run)" in out.stdout
    assert f"rank {gone}: no rank file" in out.stdout
    assert "could not read 3 rank(s) in full" in out.stdout


def truth_run(job) -> str:
    return json.loads((job / "spec.json").read_text())["run_id"]
