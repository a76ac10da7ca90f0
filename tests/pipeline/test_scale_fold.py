"""The fold of a job by stage and its outlier rule, on columns made here (pure logic, fast tier).

The replicated real job (``test_scale_job.py``) checks the rule end to end; here each part of
it is pinned on columns whose every duration is chosen, so a wrong median, a wrong threshold or
a wrong iteration run fails with a small example.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from explorer.pipeline.analysis.fold import Rule, _runs, fold, grouped
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.job import JobTrace
from explorer.pipeline.traces.job_folder import JobLayout

KINDS = (Kind.FORWARD, Kind.BACKWARD, Kind.RECV_ACTIVATION)


def columns(
    replicas: int = 32,
    iterations: int = 6,
    microbatches: int = 4,
    jitter: float = 0.05,
    slow: dict | None = None,
    seed: int = 0,
) -> JobTrace:
    """A 2-stage job: every instruction 1 ms times ``exp(N(0, jitter))``, times ``slow`` factors.

    ``slow`` maps (rank, kind, iteration) to a factor."""
    rng = np.random.default_rng(seed)
    rows = []
    t = 0.0
    for rank in range(2 * replicas):
        for it in range(iterations):
            for mb in range(microbatches):
                for kind in KINDS:
                    d = 1e-3 * float(np.exp(rng.normal(0, jitter)))
                    d *= (slow or {}).get((rank, kind, it), 1.0)
                    rows.append((rank, rank % 2, it, int(kind), mb, t, t + d))
                    t += d
    return job_of_rows(rows, 2 * replicas)


def job_of_rows(rows: list, ranks: int) -> JobTrace:
    """A job of a 2-stage pipeline (``ranks`` ranks) from rows of (rank, stage, iteration, kind,
    micro-batch, start, end), every rank file named as the layout would find it."""
    a = np.array(rows, dtype=float)
    lay = JobLayout(Path("job"), "r1", (0, 1), {r: Path(f"rank{r}.jsonl") for r in range(ranks)})
    return JobTrace(
        lay,
        rank=a[:, 0].astype(np.int32),
        stage=a[:, 1].astype(np.int16),
        iteration=a[:, 2].astype(np.int32),
        kind=a[:, 3].astype(np.int8),
        microbatch=a[:, 4].astype(np.int32),
        start=a[:, 5],
        end=a[:, 6],
        unix=np.full(ranks, np.nan),
    )


def test_grouped_spread_matches_numpy_per_group():
    rng = np.random.default_rng(1)
    group = rng.integers(0, 7, 500)
    values = rng.normal(size=500)
    g = grouped(group, values, 8)
    for k in range(7):
        v = values[group == k]
        assert g.median[k] == pytest.approx(np.median(v))
        assert (g.low[k], g.high[k]) == (v.min(), v.max())
        assert values[g.highest[k]] == v.max() and group[g.highest[k]] == k
    assert np.isnan(g.median[7]) and g.highest[7] == -1


def test_runs_finds_the_first_run_of_consecutive_slow_iterations():
    its = np.arange(8)
    assert _runs(np.array([0, 1, 0, 1, 1, 1, 0, 0], bool), its, 2) == (3, 5)
    assert _runs(np.array([0, 0, 0, 0, 0, 1, 1, 1], bool), its, 2) == (5, 7)
    assert _runs(np.array([1, 0, 1, 0, 1, 0, 1, 0], bool), its, 2) is None
    # a gap in the iterations a rank has breaks the run
    assert _runs(np.array([1, 1], bool), np.array([2, 5]), 2) is None


def test_a_rank_slow_from_an_iteration_on_is_named_with_stage_replica_and_ratio():
    slow = {(21, Kind.BACKWARD, it): 1.8 for it in range(3, 6)}
    folded = fold(columns(slow=slow))
    assert [(o.rank, o.stage, o.replica, o.kind) for o in folded.outliers] == [
        (21, 1, 10, Kind.BACKWARD)
    ]
    o = folded.outliers[0]
    assert (o.first_iteration, o.to_the_end) == (3, True)
    assert o.ratio == pytest.approx(1.8, rel=0.05)
    assert o.sentence().startswith("rank 21, stage 1 replica 10: its backward passes take 1.8")
    assert o.sentence().endswith("the stage median from iteration 3 on")


def test_a_slow_receive_names_the_rank_it_receives_from():
    slow = {(9, Kind.RECV_ACTIVATION, it): 4.0 for it in range(1, 4)}
    (o,) = fold(columns(slow=slow)).outliers
    assert (o.rank, o.stage, o.replica, o.peer, o.to_the_end) == (9, 1, 4, 8, False)
    assert o.added_s == pytest.approx(3e-3, rel=0.1)
    assert "in iterations 1 to 3: the link from rank 8" in o.sentence()


def test_noise_one_slow_iteration_and_a_small_slowdown_name_no_one():
    slow = {(6, Kind.FORWARD, 2): 3.0}  # one iteration only
    slow.update({(7, Kind.BACKWARD, it): 1.15 for it in range(6)})  # under 1.25x
    for seed in range(3):
        assert fold(columns(jitter=0.1, slow=slow, seed=seed)).outliers == ()


def test_the_threshold_follows_the_noise_of_the_stage():
    """1.4x stands out of 2 % noise but not out of 30 %: the MAD term, not the ratio, decides."""
    slow = {(4, Kind.FORWARD, it): 1.4 for it in range(6)}
    assert [o.rank for o in fold(columns(jitter=0.02, slow=slow)).outliers] == [4]
    assert fold(columns(jitter=0.3, slow=slow, microbatches=1)).outliers == ()
    assert fold(columns(jitter=0.3, slow=slow), Rule(deviations=100)).outliers == ()


def test_bands_hold_min_median_max_across_replicas_per_instruction():
    job = columns(replicas=8, iterations=2)
    folded = fold(job)
    assert len(folded.bands) == 2 * len(KINDS) * 4
    dur = job.end - job.start
    b = next(b for b in folded.bands if (b.stage, b.kind, b.microbatch) == (1, Kind.FORWARD, 2))
    sel = (job.stage == 1) & (job.kind == int(Kind.FORWARD)) & (job.microbatch == 2)
    assert (b.count, b.low, b.high) == (16, dur[sel].min(), dur[sel].max())
    assert b.median == pytest.approx(np.median(dur[sel]))
    assert b.slowest_rank == job.rank[sel][np.argmax(dur[sel])]


def test_a_job_folder_that_reads_nothing_is_one_line_exit_2(explorer_cli, tmp_path):
    (tmp_path / "spec.json").write_text(
        json.dumps({"run_id": "a", "schedule": {"stage_to_rank": [0, 1]}})
    )
    (tmp_path / "rank3.jsonl").write_text("not json at all\n")
    out = explorer_cli("read", str(tmp_path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    assert "no rank of" in out.stderr and "rank 0: no rank file" in out.stderr


def test_a_folder_is_a_job_only_with_ranks_beyond_its_pipeline(tmp_path):
    from explorer.read import detect

    (tmp_path / "spec.json").write_text(
        json.dumps({"run_id": "a", "schedule": {"stage_to_rank": [0, 1]}})
    )
    for r in (0, 1):
        (tmp_path / f"rank{r}.jsonl").write_text("")
    assert detect(tmp_path).kind == "pipeline-run"
    (tmp_path / "rank2.jsonl").write_text("")
    assert detect(tmp_path).kind == "pipeline-job"


def test_a_rank_file_of_another_run_makes_no_replica(tmp_path):
    """One rank file copied in from another run turned a 2-rank run into a failing "4-rank job"
    (its rank 3 missing): files that start another run are strays, not replicas."""
    from explorer.read import detect

    (tmp_path / "spec.json").write_text(
        json.dumps({"run_id": "a", "schedule": {"stage_to_rank": [0, 1]}})
    )
    for r in (0, 1):
        start = {"type": "start", "rank": r, "run": "a", "stages": [r]}
        (tmp_path / f"rank{r}.jsonl").write_text(json.dumps(start) + "\n")
    stray = {"type": "start", "rank": 2, "run": "b", "stages": [0]}
    (tmp_path / "rank2.jsonl").write_text(json.dumps(stray) + "\n")
    assert detect(tmp_path).kind == "pipeline-run"
    (tmp_path / "rank3.jsonl").write_text(json.dumps({**stray, "rank": 3, "run": "a"}) + "\n")
    assert detect(tmp_path).kind == "pipeline-job"  # a replica of this run: a job


def test_a_line_of_the_wrong_type_names_its_rank_and_keeps_the_others(tmp_path):
    from explorer.pipeline.traces.job import read_job

    (tmp_path / "spec.json").write_text(
        json.dumps({"run_id": "a", "schedule": {"stage_to_rank": [0]}})
    )
    line = {"type": "instr", "iteration": 0, "rank": 0, "run": "a", "stage": 0, "text": "0F0"}
    for r in (0, 1):
        rec = {**line, "rank": r, "microbatch": 0, "start": 0.0, "end": 1.0}
        if r == 1:
            rec["stage"] = "zero"
        done = {"type": "done", "rank": r, "run": "a"}  # each ran to its end
        (tmp_path / f"rank{r}.jsonl").write_text(json.dumps(rec) + "\n" + json.dumps(done) + "\n")
    job = read_job(tmp_path)
    assert len(job) == 1 and job.rank.tolist() == [0]
    assert [(u.rank, u.kept) for u in job.unread] == [(1, 0)]


def test_each_way_a_rank_can_end_badly_is_named(tmp_path):
    """Pure logic on lines of the engine's shapes: a failure line, a hazard line (the run failed
    though nothing crashed), no end line; a rank that wrote done is fine."""
    from explorer.pipeline.traces.job import read_job

    (tmp_path / "spec.json").write_text(
        json.dumps({"run_id": "a", "schedule": {"stage_to_rank": [0]}})
    )
    instr = {"type": "instr", "iteration": 0, "run": "a", "stage": 0, "text": "0F0",
             "microbatch": 0, "start": 0.0, "end": 1.0}  # fmt: skip
    endings = {
        0: [{"type": "done"}],
        1: [
            {"type": "failure", "kind": "buffer", "message": "BufferFault: inputs[0].grad is None"}
        ],
        2: [
            {"type": "hazard", "message": "ForwardPass read micro-batch 2's input"},
            {"type": "done"},
        ],
        3: [],
    }
    for r, tail in endings.items():
        lines = [{**instr, "rank": r}] + [{**t, "rank": r, "run": "a"} for t in tail]
        (tmp_path / f"rank{r}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    said = {u.rank: (u.ended, u.why) for u in read_job(tmp_path).unread}
    assert sorted(said) == [1, 2, 3] and all(ended for ended, _ in said.values())
    assert said[1][1].startswith("it failed (buffer): BufferFault")
    assert said[2][1].startswith("it read another micro-batch's data (hazard)")
    assert said[3][1].startswith("it wrote no end")
