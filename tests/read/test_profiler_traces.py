"""``explorer read`` on profiler traces that a real ``torch.distributed.pipelining`` job writes here.

One module-scoped fixture launches the jobs (``pipelining_job.py``, under ``torchrun``, gloo on
CPU) for each schedule class: ``_PipelineScheduleRuntime`` (labels ``PP:<action>``),
``ScheduleGPipe`` on 3 ranks (``Forward i``/``Backward i``), ``ScheduleInterleaved1F1B`` and
``Schedule1F1B`` (no labels at all). Every expectation is checked against the raw trace files
or PyTorch's own schedule order, never against numbers typed here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from built_once import built_once

JOB = Path(__file__).with_name("pipelining_job.py")
M = 4
JOBS = {"runtime": 2, "gpipe": 3, "interleaved": 2, "1f1b": 2}
SENTENCE = re.compile(
    r"^rank (\d+)'s (\d+)([FB])(\d+) waited [\d.e+-]+ ms for rank (\d+)'s send of micro-batch (\d+) \(\d+SEND_[FB]\d+\)$"
)


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}


@pytest.fixture(scope="module")
def jobs(tmp_path_factory) -> dict[str, Path]:
    """One folder of rank traces per schedule kind. The kinds that run on as many ranks share one
    job, one after another, each profiled into its own folder: a launcher and its ranks'
    imports less per kind."""

    def launch():
        out = {}
        for ranks in sorted(set(JOBS.values())):
            kinds = [k for k, n in JOBS.items() if n == ranks]
            root = tmp_path_factory.mktemp("-".join(kinds))
            cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks)]
            cmd += ["--standalone", str(JOB), str(root), ",".join(kinds), str(M)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
            assert done.returncode == 0, done.stderr[-3000:]
            for kind in kinds:
                folder = root / kind if len(kinds) > 1 else root
                names = sorted(p.name for p in folder.iterdir())
                assert names == [f"rank{r}.json" for r in range(ranks)]
                out[kind] = folder
        return out

    return built_once(tmp_path_factory, "profiler-trace-jobs", launch)


def _read(folder: Path, *extra: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "read", str(folder), *extra],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    return done.returncode, done.stdout + done.stderr


def _pp_labels(folder: Path) -> Counter:
    """Each rank's PP: labels, straight from the files (UNSHARD/RESHARD are no schedule instruction)."""
    seen: Counter = Counter()
    for path in folder.iterdir():
        doc = json.loads(path.read_text())
        rank = doc["distributedInfo"]["rank"]
        for ev in doc["traceEvents"]:
            name = ev.get("name", "")
            if ev.get("ph") == "X" and name.startswith("PP:") and "SHARD" not in name:
                seen[rank, name[3:]] += 1
    return seen


def _each_compute_once(rows: list[dict], stages: int) -> None:
    """Every stage forwards and backwards every micro-batch exactly once in the iteration."""
    got = Counter((r["stage"], r["kind"], r["microbatch"]) for r in rows if r["kind"] in "FB")
    want = Counter((s, k, m) for s in range(stages) for k in "FB" for m in range(M))
    assert got == want


def _check_path(doc: dict, *, crosses: bool = False) -> None:
    """The path ends at the iteration's last compute and each step follows the rule: it came
    from its data's send exactly where its receive held it past the rank's previous compute.
    Whether any step does is the machine's timing (a rank whose data always came early holds
    the whole path), except where ``crosses``: a schedule whose last compute's receive lies
    inside its own span always waits on it."""
    rows = [r for r in doc["instructions"] if r["iteration"] == doc["iteration"]]
    path = doc["critical_path"]
    computes = [r for r in rows if r["kind"] in "FB"]
    assert path["steps"], "no critical path"
    assert path["steps"][-1]["end"] == pytest.approx(
        max(r["end"] for r in computes) - min(r["start"] for r in rows)
    )
    crossings = [s for s in path["steps"] if s["via"] == "receive"]
    assert len(crossings) == len(path["sentences"]) >= (1 if crosses else 0)
    blocked = {(w["rank"], w["action"]): w["blocked"] for w in doc["waits"]}
    for a, b in zip(path["steps"], path["steps"][1:]):
        if b["via"] == "rank":  # stayed on its rank: its data did not hold it past a's end
            held = blocked.get((b["rank"], b["action"]), 0.0)
            assert b["rank"] == a["rank"]
            assert held <= 1e-7 or b["start"] + held <= a["end"] + 1e-7, (a, b, held)
    for step, sentence in zip(crossings, path["sentences"]):
        m = SENTENCE.match(sentence)
        assert m, sentence
        assert int(m[1]) == step["rank"] and int(m[5]) == step["from_rank"] != step["rank"]
        assert int(m[4]) == int(m[6]) == step["microbatch"]
        assert step["waited_s"] > 0
    for a, b in zip(path["steps"], path["steps"][1:]):  # each step follows the one before
        if b["via"] == "receive":
            # The data left after its producer began and before the consumer's wait ended (a
            # compute's span starts with its blocking receive). Not a["end"]: a single-stage
            # schedule's ``Forward i`` span also covers posting the send, so on a busy machine
            # the receiver's wait can end before that span closes.
            assert a["start"] <= b["sent"] <= b["start"] + b["waited_s"] + 1e-6
        else:
            assert a["end"] <= b["start"] + 1e-6


def _check_waits_and_bubble(doc: dict, ranks: int) -> None:
    assert doc["waits"]
    for w in doc["waits"]:
        assert w["blocked"] == pytest.approx(w["waiting"] + w["transfer"])
        assert 0 <= w["waiting"] <= w["blocked"] + 1e-12 and w["transfer"] >= -1e-12
    assert [b["rank"] for b in doc["bubble"]] == list(range(ranks))
    for b in doc["bubble"]:
        assert 0 < b["share_of_iteration"] < 1
        assert b["share_of_compute"] == pytest.approx(b["idle_s"] / b["compute_s"])
        assert b["share_of_iteration"] == pytest.approx(b["idle_s"] / b["iteration_s"])


@pytest.mark.slow
def test_runtime_labels_every_action_placed(jobs):
    code, out = _read(jobs["runtime"], "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["kind"] == "pipeline" and doc["unplaced"] == [] and doc["iterations"] == 2
    placed = Counter((r["rank"], r["action"]) for r in doc["instructions"])
    assert placed == _pp_labels(jobs["runtime"])  # every PP: action, each as often as it ran
    assert all(r["placed_by"] == "label" for r in doc["instructions"])
    last = [r for r in doc["instructions"] if r["iteration"] == 1]
    _each_compute_once(last, 4)
    assert {r["rank"]: r["stages"] for r in doc["ranks"]} == {0: [0, 2], 1: [1, 3]}
    _check_path(doc)
    _check_waits_and_bubble(doc, 2)
    code, text = _read(jobs["runtime"])
    assert code == 0 and "critical path:" in text and "longest receives" in text
    assert all(sentence in text for sentence in doc["critical_path"]["sentences"])


@pytest.mark.slow
def test_single_stage_labels_on_three_ranks(jobs):
    code, out = _read(jobs["gpipe"], "--json")
    assert code == 0, out
    doc = json.loads(out)
    last = [r for r in doc["instructions"] if r["iteration"] == doc["iteration"]]
    _each_compute_once(last, 3)
    assert {r["rank"] for r in last if r["stage"] == 1} == {1}
    recv = Counter((r["stage"], r["kind"]) for r in last if r["kind"] in ("RA", "RG"))
    assert recv == {(1, "RA"): M, (2, "RA"): M, (0, "RG"): M, (1, "RG"): M}
    assert any("taken as stage" in n for n in doc["notes"])
    _check_path(doc, crosses=True)
    _check_waits_and_bubble(doc, 3)


@pytest.mark.slow
def test_unlabelled_interleaved_matches_pytorchs_own_order(jobs):
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    code, out = _read(jobs["interleaved"], "--json")
    assert code == 0, out
    doc = json.loads(out)
    assert all(r["placed_by"] == "inferred" for r in doc["instructions"])
    assert any("ScheduleInterleaved1F1B" in n for n in doc["notes"])
    theirs = pipeline_order("ScheduleInterleaved1F1B", 2, M, 2)
    want = {int(r): [str(a) for a in acts if a is not None] for r, acts in theirs.items()}
    for it in range(doc["iterations"]):
        rows = sorted(
            (r for r in doc["instructions"] if r["iteration"] == it and r["kind"] in "FB"),
            key=lambda r: r["start"],
        )
        got = {rank: [r["action"] for r in rows if r["rank"] == rank] for rank in (0, 1)}
        assert got == want
    _check_path(doc)
    _check_waits_and_bubble(doc, 2)


@pytest.mark.slow
def test_unlabelled_1f1b_one_stage_per_rank(jobs):
    code, out = _read(jobs["1f1b"], "--json")
    assert code == 0, out
    doc = json.loads(out)
    last = [r for r in doc["instructions"] if r["iteration"] == doc["iteration"]]
    _each_compute_once(last, 2)
    forwards = [
        r["microbatch"]
        for r in sorted(last, key=lambda r: r["start"])
        if r["kind"] == "F" and r["rank"] == 1
    ]
    assert forwards == list(range(M))
    # 1F1B on the last stage alternates: each backward comes right after its own forward.
    order = [
        r["action"]
        for r in sorted(last, key=lambda r: r["start"])
        if r["kind"] in "FB" and r["rank"] == 1
    ]
    assert order == [a for m in range(M) for a in (f"1F{m}", f"1B{m}")]
    _check_path(doc)


@pytest.mark.slow
def test_views_and_page(jobs, tmp_path):
    from explorer.pipeline.analysis.measured import critical_path
    from explorer.pipeline.cli.read_profile import load
    from explorer.pipeline.cli.read_profile_views import figures

    job = load(jobs["runtime"])
    figs = figures(job)
    path = critical_path(job.iteration())
    cp = figs["critical_path"].to_dict()
    edges = next(t for t in cp["data"] if t["name"] == "critical path: send/receive edge")
    assert len(edges["x"]) == 3 * len(path["sentences"])
    assert set(t for t in edges["text"] if t) == set(path["sentences"])
    names = {t["name"] for t in cp["data"]}
    assert {
        "blocked: waiting (partner had not sent)",
        "blocked: transfer (sent, not arrived)",
    } <= names
    on_path = sum(len(t["x"]) for t in cp["data"] if t["name"].endswith("on the critical path"))
    assert on_path == len(path["steps"])
    bub = figs["bubble"].to_dict()
    titles = [a["text"] for a in bub["layout"]["annotations"]]
    assert titles == [
        "idle / iteration (share of total time)",
        "idle / the rank's compute (share of ideal time)",
    ]
    pvm = figs["planned_vs_measured"].to_dict()
    assert f"{len(job.iteration())} measured instructions" in pvm["layout"]["title"]["text"]
    page = tmp_path / "job.html"
    code, out = _read(jobs["runtime"], "--html", str(page))
    assert code == 0, out
    html = page.read_text()
    assert "Critical path across ranks" in html and '<script src="http' not in html


@pytest.mark.slow
def test_hostile_folders(jobs, tmp_path):
    dup = tmp_path / "dup"
    dup.mkdir()
    src = (jobs["runtime"] / "rank0.json").read_text()
    (dup / "a.json").write_text(src)
    (dup / "b.json").write_text(src)
    code, out = _read(dup)
    assert code == 2 and "are both rank 0" in out and "Traceback" not in out
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "rank1.json").write_text((jobs["interleaved"] / "rank1.json").read_text())
    code, out = _read(partial, "--json")
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    assert any("ranks [0] of 2 have no trace" in u for u in doc["unplaced"])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "t.json").write_text(json.dumps({"traceEvents": []}))
    code, out = _read(plain)
    assert code == 2 and "holds 1 profiler trace(s) but none names its rank" in out, out


@pytest.mark.slow
def test_measured_order_against_a_planned_csv(jobs, tmp_path):
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order
    from explorer.pipeline.schedules.torch_actions import to_action
    from explorer.pipeline.schedules.torch_csv import write_torch_csv

    theirs = pipeline_order("ScheduleInterleaved1F1B", 2, M, 2)
    order = {int(r): [to_action(a) for a in acts if a is not None] for r, acts in theirs.items()}
    plan = tmp_path / "plan.csv"
    plan.write_text(write_torch_csv(order))
    code, out = _read(jobs["interleaved"], "--json", "--from", str(plan))
    doc = json.loads(out)
    assert (
        code == 0 and doc["planned"]["source"] == str(plan) and doc["planned"]["differences"] == []
    )
    order[1] = order[1][1:] + order[1][:1]  # rank 1 plans its first forward last
    plan.write_text(write_torch_csv(order))
    code, out = _read(jobs["interleaved"], "--from", str(plan))
    first = str(order[1][-1])  # what rank 1 really ran first
    assert (
        code == 1
        and f"differs from the plan: rank 1: action 0 ran {first} where the plan has" in out
    )
    # The same plan as the explorer's own CSV (schedule --format csv), which check --from takes:
    # read --from takes it too, with the same differences.
    from explorer.pipeline.schedules.io import to_csv
    from explorer.pipeline.schedules.torch_csv import schedule_from_order

    ours = tmp_path / "ours.csv"
    ours.write_text(to_csv(schedule_from_order(order)))
    same_code, same = _read(jobs["interleaved"], "--json", "--from", str(ours))
    torch_code, theirs = _read(jobs["interleaved"], "--json", "--from", str(plan))
    assert same_code == torch_code == 1
    assert (
        json.loads(same)["planned"]["differences"] == json.loads(theirs)["planned"]["differences"]
    )


_NOT_A_PIPELINE = """
import os, sys, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2], RANK="0", WORLD_SIZE="1")
dist.init_process_group("gloo")
model = torch.nn.Linear(8, 8)
with torch.profiler.profile() as prof:
    model(torch.randn(4, 8)).sum().backward()
prof.export_chrome_trace(os.path.join(sys.argv[1], "rank0.json"))
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_a_profiled_job_without_a_pipeline_is_refused(tmp_path):
    from explorer.processes import free_port

    cmd = [sys.executable, "-c", _NOT_A_PIPELINE, str(tmp_path), str(free_port())]
    subprocess.run(cmd, check=True, capture_output=True, timeout=120, env=_env())
    code, out = _read(tmp_path)
    assert code == 2 and "not a torch.distributed.pipelining job's traces" in out
    assert "Traceback" not in out
