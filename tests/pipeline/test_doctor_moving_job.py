"""``explorer doctor`` of a job that is still moving, and of a folder holding another run's rank
files: one look at the stacks is one moment, and a rank file is only this run's when its start
line says so.

A moving job passes through waits many times a second (two ranks in ``recv`` under the batched
model, a rank in a barrier): doctor once called a healthy 1F1B and GPipe run a "wait-for
cycle", exit 1, from one snapshot, and the run then finished bitwise equal to the reference.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_in_process import call_cli, run_cli_child
from run_lock import StandIn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _lines(folder: Path) -> int:
    return sum(len(p.read_bytes().splitlines()) for p in folder.glob("rank*.jsonl"))


def test_a_moving_job_is_never_called_hung(tmp_path):
    out = tmp_path / "live"
    job = subprocess.Popen(
        [sys.executable, "-m", "explorer", "run", "--kind", "gpipe", "--stages", "2",
         "--microbatches", "16", "--iterations", "1000", "--out", str(out)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    judged = []
    try:
        deadline = time.monotonic() + 300
        while not out.exists() or _lines(out) < 100:  # both ranks well past their start
            assert job.poll() is None and time.monotonic() < deadline, "the job did not start"
            time.sleep(0.2)
        for _ in range(3):
            before = _lines(out)
            said = run_cli_child(["doctor", out, "--json"], cwd=ROOT, timeout=120)
            grew = _lines(out) - before
            doc = json.loads(said.stdout)
            if job.poll() is None and grew > 20:  # it moved while doctor looked: no hang
                judged.append((doc["verdict"], said.returncode))
    finally:
        job.kill()
        job.wait()
    # robust by design: a sample counts only where the ranks were seen writing all along
    assert judged, "the job never moved while doctor looked (a stalled machine?)"
    for verdict, code in judged:
        assert verdict not in ("cycle", "waits-on") and code == 0, judged


def test_rank_files_of_another_run_are_named_and_not_read(cli_1f1b_run, tmp_path):
    """A rank file of another run (copied in, or left by a run of more ranks) was read as this
    run's: doctor said "the run finished" where read and check said rank 1 never ran, and
    added a third rank to a 2-rank run. Each side now agrees, and doctor names the file."""
    first = cli_1f1b_run.folder
    other = run_cli_child(
        ["run", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--out",
         tmp_path / "other"], cwd=ROOT, timeout=300,
    )  # fmt: skip
    assert other.returncode == 0, other.stderr[-2000:]
    mixed = Path(shutil.copytree(first, tmp_path / "mixed"))
    shutil.copy(tmp_path / "other" / "rank1.jsonl", mixed / "rank1.jsonl")
    doc = json.loads(call_cli(["doctor", str(mixed), "--json"]).stdout)
    read = call_cli(["read", str(mixed), "--json"])
    assert doc["ok"] is False and json.loads(read.stdout)["ok"] is False
    assert [o["file"] for o in doc["other_runs"]] == ["rank1.jsonl"]
    text = call_cli(["doctor", str(mixed)]).stdout
    assert "rank1.jsonl is another run's" in text


def test_a_job_whose_ranks_have_not_started_is_starting_not_gone(cli_1f1b_run, tmp_path):
    """Ranks import torch for seconds before they write their start line: doctor of a starting
    job said every rank was gone, exit 1. While the launcher holds the folder's ``run.lock``,
    they are starting; once it lets go, a folder with no rank file is refused as before. (The
    folder is a real run's, its rank files taken away; the launcher is a stand-in that takes
    the lock as the real one does.)"""
    folder = Path(shutil.copytree(cli_1f1b_run.folder, tmp_path / "starting"))
    for rank_file in folder.glob("rank*.jsonl"):
        rank_file.unlink()
    run_id = json.loads((folder / "spec.json").read_text())["run_id"]
    (folder / "run.lock").unlink(missing_ok=True)
    launcher = StandIn(folder, run_id)
    try:
        said = call_cli(["doctor", str(folder), "--json"])
        assert said.returncode == 0, said.stderr
        doc = json.loads(said.stdout)
        assert doc["verdict"] == "starting", said.stdout[-2000:]
        assert {r["activity"] for r in doc["ranks"]} == {"starting"}
        lock = (folder / "run.lock").read_text()
        (folder / "run.lock").write_text(lock.replace(run_id, "another-run"))
        assert call_cli(["doctor", str(folder)]).returncode == 2  # the lock is another run's
        (folder / "run.lock").write_text(lock)
        launcher.release()  # alive, as a notebook kernel is after its run, but not holding it
        assert call_cli(["doctor", str(folder)]).returncode == 2  # nothing to read
    finally:
        launcher.end()
    assert call_cli(["doctor", str(folder)]).returncode == 2  # its launcher is gone
