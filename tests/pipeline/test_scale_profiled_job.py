"""A job of profiler traces, as PyTorch's own pipeline runtime writes them, read at scale.

One real 1F1B run of 4 stages on PyTorch's ``_PipelineScheduleRuntime`` under ``torch.profiler``
(``explorer run --engine torch``: a Chrome trace per rank, written by the real profiler) is
recorded for the module; each test replicates its traces into a job with known offsets, jitter
and stragglers (``tests/replicated_traces.py``) and reads it back through ``explorer read``,
the same reader, fold, clocks and step costs as a job of the explorer's own rank files.
"""

from __future__ import annotations

import json

import pytest
from built_once import built_once
from replicated_traces import replicate_traces
from test_scale_job import assert_offsets_recovered, named, planted

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold import fold
from explorer.pipeline.runtime import RunSpec
from explorer.pipeline.traces.job import read_job
from explorer.pipeline.traces.job_folder import PROFILER

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real torch-engine run folder: 1F1B, 4 stages, 4 micro-batches, 4 iterations (3 profiled),
    recorded once per run (the module's seven tests fall on both xdist workers)."""
    return built_once(
        tmp_path_factory, "torch-1f1b-4x4-profiled", lambda: _record(tmp_path_factory)
    )


def _record(tmp_path_factory):
    from explorer.pipeline.runtime.torch_engine import run_torch_engine

    folder = tmp_path_factory.mktemp("recorded")
    result = run_torch_engine(RunSpec.for_schedule(build("1f1b", 4, 4), iterations=4), folder)
    assert result.ok, result
    return folder


def test_planted_stragglers_are_named_from_the_profiler_traces(recorded, tmp_path, explorer_cli):
    truth = replicate_traces(recorded, tmp_path / "job", replicas=24, seed=3)
    job = read_job(tmp_path / "job")
    assert (job.layout.format, job.layout.ranks, job.layout.replicas) == (PROFILER, 96, 24)
    assert job.unread == () and job.decoder == "json"
    folded = fold(job)
    assert named(folded.outliers) == planted(truth)
    link = next(o for o in folded.outliers if o.peer is not None)
    assert link.peer == truth.stragglers[1].peer and link.added_s == pytest.approx(0.02, rel=0.25)
    out = explorer_cli("read", str(tmp_path / "job"), "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["kind"] == "pipeline-job" and doc["ranks"] == 96
    assert doc["step_costs"] is not None


def test_unperturbed_copies_of_the_traces_name_no_one(recorded, tmp_path, explorer_cli):
    replicate_traces(recorded, tmp_path / "job", replicas=32, stragglers=[], jitter=0.08, seed=5)
    out = explorer_cli("read", str(tmp_path / "job"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "outliers: none" in out.stdout and "128 ranks" in out.stdout


def test_planted_offsets_are_recovered_from_the_traces_within_their_bounds(recorded, tmp_path):
    """As for the engine's files (``test_scale_job``): the recording's own bounds hold its ranks'
    skew; each copy's bounds less its planted offset meet them."""
    own = clocks(read_job(recorded))
    truth = replicate_traces(recorded, tmp_path / "job", replicas=8, seed=11)
    found = clocks(read_job(tmp_path / "job"))
    # a trace's times are epoch microseconds: a float's step there is a fraction of a microsecond
    assert_offsets_recovered(own, found, truth, tolerance_s=1e-6)


def test_a_broken_trace_job_names_each_rank_it_could_not_read(recorded, tmp_path, explorer_cli):
    job = tmp_path / "job"
    truth = replicate_traces(recorded, job, replicas=6, seed=7)
    stragglers = {s.rank for s in truth.stragglers}
    cut, renamed, foreign, gone, deep, late = [r for r in range(5, 24) if r not in stragglers][:6]
    data = (job / f"torch_rank{cut}.json").read_bytes()
    (job / f"torch_rank{cut}.json").write_bytes(data[: len(data) // 2])  # killed mid-write
    (job / f"torch_rank{renamed}.json").write_bytes((job / "torch_rank1.json").read_bytes())
    replicate_traces(recorded, tmp_path / "other", replicas=2, seed=8)
    (job / f"torch_rank{foreign}.json").write_bytes(
        (tmp_path / "other" / f"torch_rank{foreign % 8}.json")
        .read_bytes()
        .replace(f'"rank": {foreign % 8},'.encode(), f'"rank": {foreign},'.encode())
    )
    (job / f"torch_rank{gone}.json").unlink()
    (job / f"torch_rank{deep}.json").write_text(
        '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}"
    )
    doc = json.loads((job / f"torch_rank{late}.json").read_text())
    doc["traceEvents"][3]["ts"] = 1e300  # no clock reads this: refused, never drawn
    (job / f"torch_rank{late}.json").write_text(json.dumps(doc))
    out = explorer_cli("read", str(job))
    assert out.returncode == 1, out.stderr
    assert f"rank {cut}: its trace is not JSON (line 1 column " in out.stdout
    assert "(cut short?)" in out.stdout
    assert f"rank {renamed}: its trace says rank 1 (distributedInfo)" in out.stdout
    assert f"rank {foreign}: its trace is of a job of 8 ranks, not this one's 24" in out.stdout
    assert f"rank {gone}: no rank file" in out.stdout
    assert f"rank {deep}: its trace nests too many levels deep" in out.stdout
    assert f"rank {late}: its trace event " in out.stdout and "times must be finite" in out.stdout
    assert "could not read 6 rank(s) in full" in out.stdout
