"""The explorer follows a user's DeepSpeed job while it runs (torchrun started by the test).

``JobFollower`` polls the folder the job's ``explorer.instrument`` writes, the way its thread
would. Nothing here rests on timing: the job script (``--gate DIR``) waits after each iteration,
and after its failure, until the test opens a gate, and the test opens it only once the follower
has drawn that state. So "seen while the job ran" is true by construction, not by a race
against torchrun's teardown. Once the job has ended, the assertions are on what the files say,
and a follower that only opens the folder afterwards must say exactly the same.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deepspeed_runs import ROOT, explorer_cli, stop_launcher
from test_instrument import SCRIPT

pytestmark = pytest.mark.slow

#: The longest the test waits for the job to reach a state (a loaded machine starts 4 ranks of
#: torch and DeepSpeed in about 30 s); a bound for a hung job, not a verdict.
PATIENCE_S = 240.0


def _until(follower, what, proc) -> None:
    """Poll ``follower`` until ``what(follower)`` holds; fail if the job ends or hangs first."""
    deadline = time.monotonic() + PATIENCE_S
    while not what(follower):
        assert proc.poll() is None, f"the job ended first: {_output(proc)}"
        assert time.monotonic() < deadline, f"not reached in {PATIENCE_S:.0f} s"
        if not follower.poll():
            time.sleep(0.05)


def _output(proc) -> str:
    """The end of what torchrun and the ranks printed (to a file: a pipe nobody reads can fill)."""
    return proc.log_path.read_text(errors="replace")[-3000:]


def _open(gate: Path, name: str) -> None:
    (gate / name).write_text("")


def _end(proc, follower) -> None:
    """Wait for torchrun to exit, then one poll: the follower reads what the job left."""
    proc.wait(timeout=PATIENCE_S)
    follower.poll()


def _release(proc, gate: Path) -> None:
    """Whatever happened, leave no job behind: open every gate, then kill what still runs."""
    for name in ("failure", *(f"iteration-{i}" for i in range(8))):
        _open(gate, name)
    if proc.poll() is None:
        stop_launcher(proc)


@pytest.fixture
def env() -> dict:
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _job(tmp_path, env, *args, ranks: int = 4):
    """torchrun with ``ranks`` ranks of the user's script, its gates in ``tmp_path/gate``, and a
    follower."""
    from explorer.pipeline.app.job_follower import JobFollower

    folder, gate, log = tmp_path / "trace", tmp_path / "gate", tmp_path / "torchrun.log"
    gate.mkdir()
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
        str(SCRIPT), "--out", str(folder), "--gate", str(gate), *args,
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    proc.log_path = log
    return proc, JobFollower(folder, job=proc), folder, gate


def test_progress_and_overlay_update_while_the_job_runs(tmp_path, env):
    """Two ranks: the claim is the follower's polling, which the ranks' number does not change."""
    proc, follower, folder, gate = _job(tmp_path, env, "--iterations", "4", ranks=2)
    try:
        for iteration in range(4):
            _until(
                follower, lambda f, i=iteration: f.history and f.history[-1]["iteration"] == i, proc
            )
            # every rank waits at this iteration's gate: the job is running, and said so
            seen = follower.history[-1]
            assert proc.poll() is None and "(running)" in follower.status.value
            assert set(seen["states"].values()) <= {"running", "done"}, seen
            _open(gate, f"iteration-{iteration}")
        _end(proc, follower)
    finally:
        _release(proc, gate)
    assert proc.returncode == 0, _output(proc)
    live = follower.history
    # Each iteration was drawn while it ran; a poll that came before any rank began its first
    # iteration (iteration -1, the ranks only started) may come first on a slow start.
    iterations = [h["iteration"] for h in live]
    assert sorted(set(iterations) - {-1}) == [0, 1, 2, 3] and iterations == sorted(iterations)
    assert all(a["records"] <= b["records"] for a, b in zip(live, live[1:]))
    assert live[-1]["finished"] is True and live[-1]["states"] == {r: "done" for r in range(2)}
    assert "(finished)" in follower.status.value
    overlay = follower.overlay.figure.to_dict()
    assert any(str(t.get("name", "")).startswith("measured") for t in overlay["data"])
    assert "stopped early" not in json.dumps(overlay["layout"])
    progress = follower.progress.figure.to_dict()["data"][0]
    assert list(progress["x"]) == [18, 18]  # every rank finished its 2 × (8 + 2 - 1) steps
    assert "failure" not in [t.get("name") for t in follower.grid.figure.to_dict()["data"]]


def _stopped_early(layout: dict) -> list[int]:
    """The ranks the breakdown's sentence says stopped early."""
    said = re.search(r"ranks? ([\d, ]+) stopped early", json.dumps(layout))
    return [int(r) for r in said.group(1).split(", ")] if said else []


def test_a_failure_is_pinned_while_the_job_runs_and_every_panel_agrees_once_it_ended(tmp_path, env):
    proc, follower, folder, gate = _job(tmp_path, env, "--legacy-order")
    try:
        _until(follower, lambda f: f.history and f.history[-1]["failure_cell"] == (2, 6), proc)
        # rank 2 holds at the failure gate: the job is running, the failure is on the grid, and
        # the ranks still silent are not said to be running (a neighbour failed)
        assert proc.poll() is None
        held = follower.history[-1]["states"]
        assert held[2] == "failed" and "running" not in held.values(), held
        grid = follower.grid.figure.to_dict()
        marker = next(t for t in grid["data"] if t.get("name") == "failure")
        assert (list(marker["x"]), list(marker["y"])) == ([6], [2])
        assert "AssertionError" in marker["text"][0]
        assert "FAILED at stage 2, step 6" in str(grid["layout"]["title"]["text"])
        assert "first failure: rank 2" in follower.status.value
        assert "running" not in follower.status.value
        _open(gate, "failure")
        _end(proc, follower)
    finally:
        _release(proc, gate)
    assert proc.returncode != 0

    # Once the job ended: one state per rank, and every panel says it.
    states = follower.history[-1]["states"]
    assert sorted(states) == [0, 1, 2, 3] and states[2] == "failed"
    assert set(states.values()) <= {"failed", "stopped"}, states
    bars = follower.progress.figure.to_dict()["data"][0]
    assert [t.split(" · ")[0] for t in bars["text"]] == [states[r] for r in range(4)]
    status = follower.status.value
    assert "(failed: " in status and "running" not in status
    for state in ("failed", "stopped"):
        ranks = [r for r in range(4) if states[r] == state]
        if ranks:
            plural = "s" if len(ranks) > 1 else ""
            assert f"rank{plural} {', '.join(map(str, ranks))} {state}" in status, status
    iteration = follower.history[-1]["iteration"]
    measured = {r["rank"] for r in follower.run.follower.records if r["iteration"] == iteration}
    assert _stopped_early(follower.overlay.figure.to_dict()["layout"]) == sorted(measured)

    # explorer read of the same folder: the same states, the same failure
    done = explorer_cli(["read", str(folder), "--json"], env, tmp_path)
    doc = json.loads(done.stdout)
    assert {r["rank"]: r["state"] for r in doc["ranks"]} == states
    assert doc["state"] == "failed" and doc["failure"]["rank"] == 2
    text = explorer_cli(["read", str(folder)], env, tmp_path).stdout
    assert "running" not in text.split("first failure")[0], text[:1500]

    # a follower that opens the folder only now says exactly the same
    from explorer.pipeline.app.job_follower import JobFollower

    late = JobFollower(folder, job=proc)
    assert late.poll()
    assert late.history[-1]["states"] == states and late.status.value == status


def test_a_job_killed_with_its_launcher_is_not_said_to_be_running(tmp_path, env):
    """No rank writes a word when torchrun and its ranks are killed together: the follower given
    the launcher knows from it, one without it and ``explorer read`` from the ranks' processes
    (host and pid on their start lines) being gone."""
    from explorer.pipeline.app.job_follower import JobFollower
    from explorer.processes.ranks import process_alive

    proc, follower, folder, gate = _job(tmp_path, env, "--iterations", "2")
    blind = JobFollower(folder)  # no launcher to ask
    pids: list[int] = []
    try:
        # Every rank's start line read, not only the first rank's iteration: the pids to kill
        # come from those lines, and a rank whose lines were read late (a busy machine) was once
        # left out, lived on, and the follower without a launcher rightly said it was running.
        _until(
            follower,
            lambda f: f.history and f.history[-1]["iteration"] == 0 and len(f.run.ranks()) == 4,
            proc,
        )
        blind.poll()
        assert set(blind.history[-1]["states"].values()) == {"running"}  # held at the gate
        pids = [r["pid"] for r in follower.run.ranks()]
        assert len(pids) == 4 and len(blind.history[-1]["states"]) == 4
        # torchrun and every rank (each in a session of its own), SIGKILL: nobody writes a word.
        # The ranks are stopped first: killed one after another, a rank still running once read
        # its killed peer's closed connection as its own failure and wrote it (a busy machine).
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        for pid in (proc.pid, *pids):
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while any(process_alive(pid) for pid in pids):  # the ranks' ends, as the kernel says
            assert time.monotonic() < deadline, "the ranks outlived SIGKILL"
            time.sleep(0.05)
        follower.poll()
        blind.poll()
    finally:
        _release(proc, gate)
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
    stopped = {r: "stopped" for r in range(4)}
    for name, each in (("with its launcher", follower), ("without", blind)):
        assert each.history[-1]["states"] == stopped, name
        assert "(stopped: ranks 0, 1, 2, 3 stopped (no end written" in each.status.value
        bars = each.progress.figure.to_dict()["data"][0]
        assert [t.split(" · ")[0] for t in bars["text"]] == ["stopped"] * 4
    doc = json.loads(explorer_cli(["read", str(folder), "--json"], env, tmp_path).stdout)
    assert doc["state"] == "stopped" and [r["state"] for r in doc["ranks"]] == ["stopped"] * 4
