"""A job of hundreds of ranks made from one real run: the planted stragglers named, nothing else.

One real 1F1B run of 4 stages (the explorer's engine on gloo) is recorded for the module; each
test replicates it into a job with known offsets, jitter and stragglers
(``tests/replicated_job.py``, the generator of ``benchmarks/scale_job.py``) and reads it back
through ``explorer read``.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from built_once import built_once
from replicated_job import TRUTH, replicate

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.clocks import clocks
from explorer.pipeline.analysis.fold import fold
from explorer.pipeline.analysis.fold_lanes import lanes, rank_lane
from explorer.pipeline.runtime import RunSpec, run_pipeline
from explorer.pipeline.schedules.instructions import KIND_BY_CODE, Kind
from explorer.pipeline.traces.job import read_job

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real run folder: 1F1B, 4 stages, 8 micro-batches, 3 iterations."""

    def launch():
        folder = tmp_path_factory.mktemp("recorded")
        result = run_pipeline(RunSpec.for_schedule(build("1f1b", 4, 8), iterations=3), folder)
        assert result.ok
        return folder

    return built_once(tmp_path_factory, "scale-job-recorded", launch)


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
    planted_link = truth.stragglers[1]
    assert planted_link.delay_s >= 0.02
    assert link.peer == planted_link.peer and link.added_s == pytest.approx(
        planted_link.delay_s, rel=0.25
    )
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
    assert "cost to the step" not in out.stdout  # no straggler, nothing costed


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


def test_ranks_that_did_not_run_to_the_end_fail_the_job(recorded, tmp_path, explorer_cli):
    """A rank file cut at a line's end (no decoder notices: every line is whole) and the ranks
    of a run that failed: the folded read named neither and said exit 0, "outliers: none",
    while ``read`` of the failed run's own folder said it failed."""
    job = tmp_path / "job"
    replicate(recorded, job, replicas=4, seed=3)
    lines = (job / "rank5.jsonl").read_text().splitlines(keepends=True)
    (job / "rank5.jsonl").write_text("".join(lines[: len(lines) // 2]))  # whole lines only
    out = explorer_cli("read", str(job))
    assert out.returncode == 1 and "1 rank(s) did not run to the end" in out.stdout, out.stdout
    assert "rank 5: it wrote no end (no done or failure line)" in out.stdout
    doc = json.loads(explorer_cli("read", str(job), "--json").stdout)
    assert doc["ok"] is False and doc["unread"] == []
    assert [(r["rank"], r["instructions"] > 0) for r in doc["not_ended"]] == [(5, True)]
    whole = max(json.loads(x)["iteration"] for x in lines[: len(lines) // 2] if '"instr"' in x)
    assert doc["critical_path"]["iteration"] < whole  # not the iteration rank 5 was cut in


def test_the_ranks_of_a_failed_run_are_said_failed(seed_bug_run):
    from explorer.pipeline.traces.job import read_job

    _, result = seed_bug_run
    ended = {u.rank: u for u in read_job(result.folder).unread}
    assert ended and all(u.ended for u in ended.values())
    assert "it failed (buffer): BufferFault" in ended[result.failure.rank].why


def test_a_failed_run_is_refused_as_a_template_by_name(seed_bug_run, tmp_path):
    """Replicating the seed's failed run raised a KeyError (its failure line has no times)."""
    _, result = seed_bug_run
    with pytest.raises(ValueError, match="did not finish"):
        replicate(result.folder, tmp_path / "job", 2)


def truth_run(job) -> str:
    return json.loads((job / "spec.json").read_text())["run_id"]


# -- clocks ---------------------------------------------------------------------------------------


def _relative(truth) -> np.ndarray:
    """Each rank's planted offset relative to its replica's first rank."""
    off = np.array(truth.offsets_s)
    p = truth.pipeline_ranks
    return off - off[(np.arange(len(off)) // p) * p]


def assert_offsets_recovered(own, found, truth, tolerance_s: float = 1e-9) -> None:
    """Every copy's bounds, less its planted offset, meet its recorded rank's own bounds (see
    the test below); every rank but each replica's first is bounded."""
    assert own.contradicted == {} and own.messages > 0
    assert found.contradicted == {} and found.messages == truth.replicas * own.messages
    p = truth.pipeline_ranks
    local = np.arange(truth.replicas * p) % p
    low, high = found.low - _relative(truth), found.high - _relative(truth)
    overlap = np.maximum(low, own.low[local]) <= np.minimum(high, own.high[local]) + tolerance_s
    assert overlap.all(), np.flatnonzero(~overlap)
    assert len(found.bounded()) == truth.replicas * (p - 1)


def test_planted_clock_offsets_are_recovered_within_their_bounds(recorded, tmp_path, explorer_cli):
    """The recorded run's ranks already differ by their own small skew (each takes its time zero
    as it leaves a barrier, not at one instant): its bounds hold that skew. A copy's rank is off
    by its planted offset plus its recorded rank's skew, so its bounds, less the planted offset,
    must meet the recording's bounds (both hold the same unknown skew): the planted offsets are
    recovered within the bounds, jitter and stragglers included."""
    own = clocks(read_job(recorded))
    truth = replicate(recorded, tmp_path / "job", replicas=16, seed=11)
    found = clocks(read_job(tmp_path / "job"))
    assert_offsets_recovered(own, found, truth)
    assert len(found.unbounded()) == 0
    # a copy's bounds are as narrow as the recording's (the warp stretches them by a few %);
    # not the slow link's receiver: its delayed receives (iterations 1 on) no longer bound it, so
    # its width is the tightest message of iteration 0's, which a busy machine can make wide
    local = np.arange(16 * truth.pipeline_ranks) % truth.pipeline_ranks
    delayed = [s.rank for s in truth.stragglers if s.delay_s > 0]
    others = (local != 0) & ~np.isin(np.arange(len(local)), delayed)
    assert (found.width[others] <= 1.25 * own.width[local][others] + 1e-6).all()
    out = explorer_cli("read", str(tmp_path / "job"), "--json")
    doc = json.loads(out.stdout)["clocks"]
    assert doc["messages"] == found.messages and len(doc["offsets"]) == 16 * truth.pipeline_ranks
    # the farthest estimate is the planted offset plus the recording's skew, within both widths
    far = max(doc["offsets"], key=lambda o: abs(o["estimate_s"]))
    r = far["rank"]
    skew = own.estimate[r % truth.pipeline_ranks]
    slack = (found.width[r] + own.width[r % truth.pipeline_ranks]) / 2 + 1e-6
    assert abs(far["estimate_s"] - _relative(truth)[r] - skew) <= slack


def _edit(folder, rank: int, edit) -> None:
    """Rewrite ``rank``'s file line by line (``edit(line) -> line or None``), as the engine wrote it."""
    path = folder / f"rank{rank}.jsonl"
    kept = [edit(json.loads(x)) for x in path.read_text().splitlines() if x.strip()]
    path.write_text("".join(json.dumps(x) + "\n" for x in kept if x is not None))


def test_a_clock_that_jumps_mid_run_is_said_to_contradict_causality(recorded, tmp_path):
    """Rank 5's clock jumps 0.5 s ahead from iteration 1 on: no single offset explains both
    halves of its replica's messages, so that replica gets no offsets and the miss is said."""
    truth = replicate(recorded, tmp_path / "job", replicas=4, stragglers=[], seed=12)

    def jump(x: dict) -> dict:
        if x.get("iteration", -1) >= 1 and "start" in x:
            x = {**x, "start": x["start"] + 0.5, "end": x["end"] + 0.5}
        return x

    _edit(tmp_path / "job", 5, jump)
    found = clocks(read_job(tmp_path / "job"))
    replica = 5 // truth.pipeline_ranks
    assert set(found.contradicted) == {replica}
    contradiction = found.contradicted[replica]
    assert contradiction.miss_s == pytest.approx(0.5, abs=0.05)
    assert 5 in contradiction.ranks and contradiction.ranks[1] - contradiction.ranks[0] == 1
    assert np.isnan(found.estimate[replica * 4 : replica * 4 + 4]).all()
    said = "\n".join(found.sentences())
    assert f"replica {replica}: no offsets explain its times: the messages between ranks" in said


def test_messages_one_way_only_bound_an_offset_on_one_side_and_say_so(recorded, tmp_path):
    """Without the gradients (only activations flowing forward, as in inference), each message
    bounds its receiver's offset from above only: no rank is bounded on both sides, and the
    report says which ranks are not, rather than a midpoint of nothing."""
    replicate(recorded, tmp_path / "job", replicas=2, stragglers=[], seed=13)
    for rank in range(8):
        _edit(tmp_path / "job", rank, lambda x: None if "Grad" in x.get("instruction", "") else x)
    found = clocks(read_job(tmp_path / "job"))
    assert len(found.bounded()) == 0 and list(found.unbounded()) == [1, 2, 3, 5, 6, 7]
    assert np.isfinite(found.high[[1, 2, 3]]).all() and np.isinf(found.low[[1, 2, 3]]).all()
    assert "not bounded on both sides (no message chain each way): ranks 1, 2, 3, 5, 6, 7" in (
        "\n".join(found.sentences())
    )


# -- the folded view ------------------------------------------------------------------------------


def test_the_folded_lanes_hold_every_replica_and_the_straggler_is_its_cells_slowest(
    recorded, tmp_path
):
    truth = replicate(recorded, tmp_path / "job", replicas=24, from_iteration=1, seed=21)
    job = read_job(tmp_path / "job")
    cells = lanes(job)
    assert (cells.count == 24).all(), "every cell holds one instruction of each replica"
    per_replica = len(job) // 24
    assert len(cells) == per_replica, "one cell per instruction of one replica, not per rank"
    slow = truth.stragglers[0]  # backward passes 1.8x from iteration 1 on
    mine = (cells.stage == slow.stage) & (cells.kind == int(KIND_BY_CODE[slow.kind]))
    later = mine & (cells.iteration >= slow.from_iteration)
    assert (cells.slowest_rank[later] == slow.rank).all()
    assert (cells.high[later] / cells.median[later] > 1.5).all()
    lane = rank_lane(job, slow.rank)
    assert set(lane.stage.tolist()) == {slow.stage}
    assert len(lane.start) == int((job.rank == slow.rank).sum()) and (lane.start >= 0).all()
    # its own slow instructions are exactly the cells' slowest, 1.8x their medians
    own = (lane.kind == int(KIND_BY_CODE[slow.kind])) & (lane.iteration >= slow.from_iteration)
    assert np.allclose(np.sort(lane.end[own] - lane.start[own]), np.sort(cells.high[later]))
    ratio = np.median(cells.high[later] / cells.median[later])
    assert ratio == pytest.approx(slow.factor, rel=0.15)


def test_the_page_and_the_widget_open_each_planted_stragglers_lane(
    recorded, tmp_path, explorer_cli
):
    from explorer.pipeline.app.folded_job import FoldedJob
    from explorer.pipeline.views.folded import OUTLIERS

    truth = replicate(recorded, tmp_path / "job", replicas=24, from_iteration=1, seed=22)
    page = tmp_path / "folded.html"
    out = explorer_cli("read", str(tmp_path / "job"), "--html", str(page))
    assert out.returncode == 1, out.stderr  # outliers named
    text = page.read_text()
    assert "96 ranks folded: 4 stages x 24 replicas; 2 outlier ranks" in text
    for s in truth.stragglers:
        assert f"id='lane-{s.rank}'" in text
        assert f"rank {s.rank} costs its replica&#x27;s step" in text
    view = FoldedJob(tmp_path / "job")
    marks = next(t for t in view.folded.figure.data if t.name == OUTLIERS)
    assert sorted(marks.customdata) == sorted(s.rank for s in truth.stragglers)
    view._clicked([{"name": OUTLIERS, "index": 1, "curve": 0}])
    assert view.selected == marks.customdata[1]
    assert view.lane.figure.layout.title.text.startswith(f"rank {view.selected}: its own lane")
    assert f"<b>rank {view.selected}</b>: rank {view.selected}, stage" in view.lane_title.value
    view._clicked([{"name": "F ForwardPass", "index": 0}])  # a bar, not a mark: nothing opens
    assert view.selected == marks.customdata[1]
    with pytest.raises(ValueError, match="is not a rank of this job"):
        view.show_rank(96)


def test_reading_on_every_core_gives_the_same_columns_and_the_same_unread_ranks(recorded, tmp_path):
    """Worker processes read chunks of ranks; their columns come back in rank order, identical to
    one process's, and a damaged rank is named the same way."""
    replicate(recorded, tmp_path / "job", replicas=40, seed=31)  # 160 ranks: ten chunks
    data = (tmp_path / "job" / "rank37.jsonl").read_bytes()
    (tmp_path / "job" / "rank37.jsonl").write_bytes(data[: len(data) // 3])
    one, two = read_job(tmp_path / "job", workers=1), read_job(tmp_path / "job", workers=2)
    for column in ("rank", "stage", "iteration", "kind", "microbatch", "start", "end"):
        assert np.array_equal(getattr(one, column), getattr(two, column)), column
    assert np.array_equal(one.unix, two.unix, equal_nan=True)
    assert one.unread == two.unread and [u.rank for u in two.unread] == [37]


def test_each_stragglers_cost_to_the_step_is_positive_and_at_most_the_time_it_adds(
    recorded, tmp_path, explorer_cli
):
    """The step simulated with the straggler as measured, against the medians: a slow rank's cost
    is above zero (1F1B's last stages are on the critical path) and never more than the extra
    time its slow instructions add in an iteration; the deciding rank is the costliest."""
    from explorer.pipeline.analysis.step_cost import medians_ms, step_costs

    truth = replicate(recorded, tmp_path / "job", replicas=24, from_iteration=1, seed=41)
    job = read_job(tmp_path / "job")
    folded = fold(job)
    costs = step_costs(job, folded, build("1f1b", 4, 8))
    by_rank = {c.outlier.rank: c for c in costs.costs}
    assert set(by_rank) == {s.rank for s in truth.stragglers}
    base = medians_ms(job)
    for s in truth.stragglers:
        cost, kind = by_rank[s.rank], KIND_BY_CODE[s.kind]
        per_iteration = int(
            ((job.rank == s.rank) & (job.kind == int(kind)) & (job.iteration == 1)).sum()
        )
        added = (
            (cost.outlier.ratio - 1) * base[kind] if kind in base else cost.outlier.added_s * 1e3
        ) * per_iteration
        assert 0 < cost.cost_ms <= added * 1.0001, (s, cost, added)
    assert costs.deciding is max(costs.costs, key=lambda c: c.cost_ms)
    doc = json.loads(explorer_cli("read", str(tmp_path / "job"), "--json").stdout)
    assert doc["step_costs"]["deciding_rank"] == costs.deciding.outlier.rank
    assert [c["rank"] for c in doc["step_costs"]["costs"]] == [c.outlier.rank for c in costs.costs]


# -- the critical path ----------------------------------------------------------------------------


def test_a_real_runs_critical_path_runs_from_stage_0_to_the_last_end_across_messages(recorded):
    """One real 1F1B run (one replica): the path of its last iteration begins with rank 0's first
    instruction (every other rank begins by receiving), ends with the instruction that ended
    last (whichever rank's that was: the race is the run's own), and reaches each other rank it
    visits through a message."""
    from explorer.pipeline.analysis.fold_path import folded_path

    job = read_job(recorded)
    clocked = clocks(job)
    path = folded_path(job, clocked)
    assert path is not None and path.replica == 0 and path.iteration == 2
    it = job.iteration == path.iteration
    start = job.start - np.nan_to_num(clocked.estimate)[job.rank]
    end = start + (job.end - job.start)

    def key(i: int) -> tuple[int, int, int]:
        return int(job.rank[i]), int(job.kind[i]), int(job.microbatch[i])

    first = int(np.argmin(np.where(it & (job.rank == 0), start, np.inf)))
    last = int(np.argmax(np.where(it, end, -np.inf)))
    steps = list(zip(path.rank.tolist(), path.kind.tolist(), path.microbatch.tolist()))
    assert steps[0] == key(first) and steps[-1] == key(last)
    assert path.hops()[0] == 0
    # a step on another rank than the one before it came by a message, and only such a step
    moved = np.concatenate(([False], path.rank[1:] != path.rank[:-1]))
    assert np.array_equal(moved, path.via_message)
    # a receive the path stayed on its rank for had its data sent before the rank was ready:
    # whether any receive was late is the run's own race, the rule is not
    index = {key(i): i for i in np.flatnonzero(it).tolist()}
    peer_send = {
        int(Kind.RECV_ACTIVATION): (-1, Kind.SEND_ACTIVATION),
        int(Kind.RECV_GRAD): (1, Kind.SEND_GRAD),
    }
    for n in np.flatnonzero(~path.via_message[1:] & np.isin(path.kind[1:], list(peer_send))) + 1:
        r, k, mb = steps[n]
        step, send_kind = peer_send[k]
        send = index[(r + step, int(send_kind), mb)]
        assert start[send] < end[index[steps[n - 1]]], (steps[n - 1], steps[n])
    assert 0 < path.length_s <= path.step_s * (1 + 1e-9)
    held = sum(path.held_s().values())
    assert held + path.gaps_s == pytest.approx(path.length_s, rel=1e-9) and held > 0


def test_the_path_of_a_replicated_job_is_in_the_report_the_json_the_page_and_the_widget(
    recorded, tmp_path, explorer_cli
):
    from explorer.pipeline.analysis.fold_path import folded_path, slowest_replica
    from explorer.pipeline.app.folded_job import FoldedJob
    from explorer.pipeline.views.folded import PATH

    truth = replicate(recorded, tmp_path / "job", replicas=12, from_iteration=1, seed=23)
    job = read_job(tmp_path / "job")
    clocked = clocks(job)
    path = folded_path(job, clocked)
    assert path is not None
    on_clock = job.start - np.nan_to_num(clocked.estimate)[job.rank]
    assert (path.replica, path.step_s) == slowest_replica(job, path.iteration, on_clock)
    assert set(path.rank.tolist()) <= set(range(4 * path.replica, 4 * path.replica + 4))
    held = path.held_s()  # a straggler's spans overlap its next ones here: nothing counted twice
    assert sum(held.values()) <= path.length_s * (1 + 1e-9) and path.gaps_s >= 0
    doc = json.loads(explorer_cli("read", str(tmp_path / "job"), "--json").stdout)
    got = doc["critical_path"]
    assert (got["replica"], got["hops"]) == (path.replica, path.hops())
    text = explorer_cli("read", str(tmp_path / "job"), "--html", str(tmp_path / "p.html")).stdout
    assert (
        f"critical path: replica {path.replica} (the slowest), iteration {path.iteration}" in text
    )
    for s in truth.stragglers:  # each named rank is said to be on the path, off it, or elsewhere
        assert f"  rank {s.rank} " in text.split("critical path:")[1]
    assert f"critical path: replica {path.replica}" in (tmp_path / "p.html").read_text()
    view = FoldedJob(tmp_path / "job")
    line = next(t for t in view.folded.figure.data if t.name == PATH)
    assert len(line.x) == 2 * len(path) and set(line.y) <= set(range(4))
    assert f"critical path: replica {path.replica}" in view.summary.value


def test_a_job_numbered_pipe_major_is_read_in_its_own_numbers_with_the_users_mesh(
    recorded, tmp_path, explorer_cli
):
    """The engine's copies numbered as DeepSpeed and torchtitan's (pp, dp) mesh number them: the
    folder cannot say so (its spec.json is one pipeline's), the user's ``--mesh`` does, and the
    planted stragglers are named by the job's own numbers; the folder laid out the default way
    would name other ranks."""
    truth = replicate(recorded, tmp_path / "job", replicas=12, seed=41, order="pipe-major")
    assert [s.rank for s in truth.stragglers] != [s.replica * 4 + s.stage for s in truth.stragglers]
    out = explorer_cli("read", str(tmp_path / "job"), "--json", "--mesh", "pp=4,dp=12")
    doc = json.loads(out.stdout)
    assert (out.returncode, doc["ranks"], doc["replicas"], doc["unread"]) == (1, 48, 12, [])
    assert doc["layout"] == "rank = the schedule's rank * replicas + replica"
    said = {(o["rank"], o["stage"], o["replica"], o["peer"]) for o in doc["outliers"]}
    assert said == {(s.rank, s.stage, s.replica, s.peer) for s in truth.stragglers}

    # Laid out the default way, the same slow ranks were found (their times are their own) but
    # put in other replicas, and the slow link blamed on another rank. The ranks' lines name
    # their stages, which contradict that numbering: refused, with the mesh to give.
    default = explorer_cli("read", str(tmp_path / "job"), "--json")
    assert default.returncode == 2 and not default.stdout, default.stdout[-300:]
    assert "give --mesh as the job numbered its ranks (--mesh pp=4,dp=12" in default.stderr


def test_a_mesh_the_folder_contradicts_is_one_line_and_exit_2(recorded, tmp_path, explorer_cli):
    replicate(recorded, tmp_path / "job", replicas=3, stragglers=[], seed=42)
    for mesh, says in (
        ("pp=2,dp=6", "give pp=4"),
        ("pp=4,dp=2", "has a file of rank 11: give dp=3 or more"),
        ("tp=2,pp=4,dp=3", "only pp and dp are laid out"),
        ("pp=4", "dp is missing"),
        # laid the other way: rank 1's lines are stage 1's, the mesh puts it at stage 0
        ("pp=4,dp=3", "places rank 1 at the schedule's rank 0, but its lines are stage 1's"),
    ):
        out = explorer_cli("read", str(tmp_path / "job"), "--mesh", mesh)
        assert out.returncode == 2 and says in out.stderr, (mesh, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr
    out = explorer_cli("read", str(recorded), "--mesh", "pp=4,dp=1")
    assert out.returncode == 2 and "--mesh is not available for pipeline-run" in out.stderr
