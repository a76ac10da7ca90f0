"""The explorer follows a user's DeepSpeed job while it runs (torchrun started by the test).

``JobFollower`` polls the folder the job's ``explorer.instrument`` writes; the test polls it the
way its thread would and notes, at each redraw, whether torchrun was still running.
"""

from __future__ import annotations

import os
import time

import pytest
from conftest import ROOT
from test_instrument import torchrun

pytestmark = pytest.mark.slow


def _follow(proc, folder):
    from explorer.widgets.job_follower import JobFollower

    follower = JobFollower(folder)
    running_at: list[bool] = []  # for each redraw: was the job still running?
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        alive = proc.poll() is None
        if follower.poll():
            running_at.append(alive)
        if not alive:  # the job ended: one last read of what it left
            if follower.poll():
                running_at.append(False)
            break
        time.sleep(0.05)
    proc.wait(timeout=60)
    return follower, running_at


@pytest.fixture
def env() -> dict:
    path = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def test_progress_and_overlay_update_while_the_job_runs(tmp_path, env):
    folder = tmp_path / "trace"
    proc = torchrun(folder, "--iterations", "4", "--pause", "1.0", env=env, background=True)
    follower, running_at = _follow(proc, folder)
    assert proc.returncode == 0
    live = [h for h, alive in zip(follower.history, running_at) if alive]
    # several redraws before the job ended, each iteration seen while it ran
    assert len(live) >= 4, follower.history
    assert sorted({h["iteration"] for h in live}) == [0, 1, 2, 3]
    assert all(a["records"] <= b["records"] for a, b in zip(live, live[1:]))
    assert follower.history[-1]["finished"] is True
    overlay = follower.overlay.figure.to_dict()
    assert any(str(t.get("name", "")).startswith("measured") for t in overlay["data"])
    progress = follower.progress.figure.to_dict()["data"][0]
    assert list(progress["x"]) == [22, 22, 22, 22]  # every rank finished its 22 steps
    assert "failure" not in [t.get("name") for t in follower.grid.figure.to_dict()["data"]]


def test_a_failure_is_pinned_on_the_grid_before_the_job_ends(tmp_path, env):
    folder = tmp_path / "trace"
    proc = torchrun(folder, "--legacy-order", env=env, background=True)
    follower, running_at = _follow(proc, folder)
    assert proc.returncode != 0
    pinned = [
        alive for h, alive in zip(follower.history, running_at) if h["failure_cell"] == (2, 6)
    ]
    assert pinned and pinned[0] is True, "the failure was not on the grid while the job ran"
    grid = follower.grid.figure.to_dict()
    marker = next(t for t in grid["data"] if t.get("name") == "failure")
    assert (list(marker["x"]), list(marker["y"])) == ([6], [2])
    assert "AssertionError" in marker["text"][0] and "FAILED at stage 2, step 6" in str(
        grid["layout"]["title"]["text"]
    )
    assert "first failure: rank 2" in follower.status.value
