"""A run folder holds one run: concurrent runs are refused, reused folders set the old run aside,
records of another run are never read, and ``--collect`` reaches the live run's verdict.

These start real ranks (a few seconds each): marked slow.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .contract import ROOT, run_cli

pytestmark = pytest.mark.slow

RUN = ["run", "--stages", "2", "--microbatches", "4", "--json"]


def _run(folder: Path, kind: str, cwd: Path) -> dict:
    ran = run_cli([*RUN, "--kind", kind, "--out", str(folder)], str(cwd), timeout=180)
    assert ran.returncode == 0, ran.stderr[-2000:]
    return _with_id(json.loads(ran.stdout))


def _with_id(doc: dict) -> dict:
    """The JSON keeps the issue's keys exactly; the run's id is on every instruction record."""
    ids = {r["run"] for r in doc["instructions"]}
    assert len(ids) == 1, ids
    return {**doc, "run_id": ids.pop()}


def _runs_of(folder: Path) -> set:
    return {
        json.loads(line).get("run")
        for p in folder.glob("rank*.jsonl")
        for line in p.read_text().splitlines()
    }


def _shared(run, tmp_path: Path) -> tuple[Path, dict]:
    """A copy of the suite's one ``run --kind 1f1b --stages 2 --microbatches 4 --out F --json``
    (``tests/shared_runs.py``), and its JSON: what ``_run(folder, "1f1b", ...)`` would give."""
    assert run.done.returncode == 0, run.done.stderr[-2000:]
    return shutil.copytree(run.folder, tmp_path / "run"), _with_id(json.loads(run.done.stdout))


def test_a_reused_folder_sets_the_earlier_run_aside(tmp_path, cli_1f1b_run):
    folder, first = _shared(cli_1f1b_run, tmp_path)
    second = _run(folder, "gpipe", tmp_path)
    assert first["run_id"] != second["run_id"]
    assert len(second["instructions"]) == len(first["instructions"])  # one run's records, not two
    assert {r["run"] for r in second["instructions"]} == {second["run_id"]}
    assert _runs_of(folder) == {second["run_id"]}
    kept = folder / "previous" / first["run_id"]
    assert json.loads((kept / "spec.json").read_text())["run_id"] == first["run_id"]
    assert json.loads((kept / "result.json").read_text())["run"] == first["run_id"]
    collected = run_cli(["run", "--collect", str(folder), "--json"], str(tmp_path))
    assert (
        collected.returncode == 0
        and _with_id(json.loads(collected.stdout))["run_id"] == second["run_id"]
    )


def test_two_runs_into_one_folder_at_once_one_is_refused(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = {
        kind: subprocess.Popen(
            [sys.executable, "-m", "explorer.cli", *RUN, "--kind", kind, "--out", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for kind in ("1f1b", "gpipe")
    }
    done = {kind: (p.wait(180), *p.communicate()) for kind, p in procs.items()}
    codes = sorted(code for code, _, _ in done.values())
    assert codes == [0, 2], {k: (c, e[-500:]) for k, (c, _, e) in done.items()}
    winner = next(k for k, (c, _, _) in done.items() if c == 0)
    loser = next(k for k, (c, _, _) in done.items() if c == 2)
    err = done[loser][2].splitlines()
    assert len(err) == 1 and "in use by another run" in err[0]
    result = _with_id(json.loads(done[winner][1]))
    spec = json.loads((folder / "spec.json").read_text())
    assert spec["run_id"] == result["run_id"] and spec["schedule"]["name"] == winner
    assert {r["run"] for r in result["instructions"]} == {result["run_id"]}


def test_lines_of_another_run_are_not_read(tmp_path, cli_1f1b_run):
    folder, result = _shared(cli_1f1b_run, tmp_path)
    with open(
        folder / "rank0.jsonl", "a"
    ) as fh:  # a stray line of another run, e.g. a stale writer
        fh.write(
            json.dumps(
                {
                    "type": "failure",
                    "rank": 0,
                    "run": "someone-else",
                    "stage": 0,
                    "step": 0,
                    "instruction": "ForwardPass(buffer_id=0)",
                    "cause": "error",
                    "message": "not ours",
                    "time": 0.0,
                }
            )
            + "\n"
        )
    collected = run_cli(["run", "--collect", str(folder), "--json"], str(tmp_path))
    assert collected.returncode == 0, collected.stdout[-500:]
    doc = json.loads(collected.stdout)
    assert doc["failure"] is None and len(doc["instructions"]) == len(result["instructions"])


def test_collect_names_the_failure_the_live_run_named(tmp_path):
    """A rank killed from outside: its exit code is saved, so the folder alone tells the same story."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import Fault, RunSpec, run_pipeline

    folder = tmp_path / "run"
    live = run_pipeline(
        RunSpec.for_schedule(build("1f1b", 2, 4), fault=Fault(rank=1, step=3, how="kill")), folder
    )
    assert not live.ok and "killed" in live.failure.message
    collected = run_cli(["run", "--collect", str(folder), "--json"], str(tmp_path))
    assert collected.returncode == 1
    assert json.loads(collected.stdout)["failure"] == live.failure.to_dict()


def _verdicts(folder: Path, cwd: Path) -> list:
    """``read``, ``check`` and ``run --collect`` of ``folder``: (exit code, words) each."""
    said = []
    for argv in (["read", str(folder)], ["check", str(folder)], ["run", "--collect", str(folder)]):
        out = run_cli(argv, str(cwd))
        said.append((out.returncode, out.stdout + out.stderr))
    return said


@pytest.mark.parametrize("damage", ["rank file gone", "rank file empty", "rank file another run's"])
def test_a_folder_missing_a_ranks_record_is_never_ok(tmp_path, cli_1f1b_run, damage):
    """With rank 1's record gone, read said "ok ... bitwise equal" and check "every message
    matches" (exit 0): half a run passed for a whole one."""
    folder, result = _shared(cli_1f1b_run, tmp_path)
    rank1 = folder / "rank1.jsonl"
    if damage == "rank file gone":
        rank1.unlink()
    elif damage == "rank file empty":
        rank1.write_text("")
    else:
        rank1.write_text(rank1.read_text().replace(result["run_id"], "20991231-000000-deadbeef"))
    for code, words in _verdicts(folder, tmp_path):
        assert code == 1, words
        assert "rank 1 has no record of finishing this run" in words, words


@pytest.mark.parametrize("damage", ["no result", "another run's result"])
def test_a_folder_without_its_result_is_unfinished_not_wrong(tmp_path, cli_1f1b_run, damage):
    """No result.json (or another run's) read as "WRONG ... DIFFERENT from the reference":
    nothing was compared, so nothing is different."""
    folder, _ = _shared(cli_1f1b_run, tmp_path)
    if damage == "no result":
        (folder / "result.json").unlink()
    else:
        doc = json.loads((folder / "result.json").read_text())
        (folder / "result.json").write_text(json.dumps({**doc, "run": "20991231-000000-deadbeef"}))
    for code, words in _verdicts(folder, tmp_path):
        assert code == 1 and "holds no result of this run" in words, words
        assert "DIFFERENT" not in words, words


def test_a_spec_of_another_run_is_refused_naming_both_runs(tmp_path, cli_1f1b_run):
    folder, result = _shared(cli_1f1b_run, tmp_path)
    spec = json.loads((folder / "spec.json").read_text())
    (folder / "spec.json").write_text(json.dumps({**spec, "run_id": "20991231-000000-deadbeef"}))
    doctor = run_cli(["doctor", str(folder)], str(tmp_path))
    for code, words in [*_verdicts(folder, tmp_path), (doctor.returncode, doctor.stderr)]:
        assert code == 2 and "mixes two runs" in words and result["run_id"] in words, words


def test_a_trace_is_never_written_over_the_runs_own_records(tmp_path, cli_1f1b_run):
    folder, _ = _shared(cli_1f1b_run, tmp_path)
    before = (folder / "rank0.jsonl").read_text()
    for argv in (
        ["run", "--collect", str(folder), "--trace", str(folder / "rank0.jsonl")],
        [*RUN, "--kind", "1f1b", "--out", str(folder), "--trace", str(folder / "spec.json")],
    ):
        out = run_cli(argv, str(tmp_path))
        assert out.returncode == 2 and "would overwrite a file of the run folder" in out.stderr
    assert (folder / "rank0.jsonl").read_text() == before
