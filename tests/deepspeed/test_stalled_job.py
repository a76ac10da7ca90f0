"""A user's DeepSpeed job that stops moving is said stalled by ``JobFollower`` and diagnosed.

torchrun starts 2 ranks of the user's script on gloo; rank 1 sleeps in user code (a forward
pre-hook, ``--hang-rank 1``) at its third forward pass, so rank 0 waits on it in a send or a
receive and no rank writes again. The test drives the widget's Python object as its thread
would. Nothing rests on timing: the sleep lasts an hour, so once the job is silent it stays
silent; the test waits for conditions (the status says stalled, the verdict names the hang),
never for a fixed time. The job is killed at the end and checked gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deepspeed_runs import stop_launcher
from test_instrument import SCRIPT

from explorer.processes.ranks import process_alive
from explorer.processes.stacks import tree

pytestmark = pytest.mark.slow

#: The repository (on the ranks' PYTHONPATH, so they run this checkout's explorer).
ROOT = Path(__file__).resolve().parents[2]

#: A back-stop for reaching the hang (2 ranks of torch and DeepSpeed start on a busy machine).
PATIENCE_S = 240.0
#: Short, so the test is; the rule's default is checked in tests/pipeline/test_stall_rule.py.
STALL_AFTER_S = 3.0


def _hang_line() -> int:
    """The line of the user's script that sleeps (where the diagnosis must point)."""
    source = Path(SCRIPT).read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if "time.sleep(3600)" in line)


def _until(follower, what, proc, log: Path) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not what(follower):
        assert proc.poll() is None, (
            f"the job ended first: {log.read_text(errors='replace')[-3000:]}"
        )
        assert time.monotonic() < deadline, (
            f"not reached in {PATIENCE_S:.0f} s: {follower.status.value}"
        )
        if not follower.poll():
            time.sleep(0.1)


def _diagnosed(follower) -> bool:
    """The job is said stalled and the latest verdict names the hang: rank 0 waits on rank 1.

    Rank 1 sleeps for an hour, so a verdict that holds once holds from then on. An earlier
    diagnosis may have come while rank 0 was still on its way into its wait; pressing
    "diagnose" again (as a user would) reads the stacks anew.
    """
    if follower.stalled_s is None:
        return False
    d = follower.diagnosis
    if d is not None and (d.verdict.verdict, d.verdict.culprit) == ("waits-on", 1):
        return True
    if d is not None:
        follower.diagnose()
    return False


def test_a_job_that_stops_moving_is_said_stalled_diagnosed_and_pinned(tmp_path):
    from explorer.pipeline.app.job_follower import JobFollower

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    folder, log = tmp_path / "trace", tmp_path / "torchrun.log"
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        str(SCRIPT), "--out", str(folder), "--hang-rank", "1",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    follower = JobFollower(folder, job=proc, stall_after_s=STALL_AFTER_S)
    seen: list[int] = []
    try:
        _until(follower, lambda f: f.history and "(running)" in f.status.value, proc, log)
        _until(follower, _diagnosed, proc, log)
        seen = [p.pid for p in tree(proc.pid)]
        status = follower.status.value
        assert "(stalled for " in status and "(running)" not in status, status
        verdict = follower.diagnosis.verdict
        assert verdict.waiting == (0,)
        sleeper, waiter = verdict.state(1), verdict.state(0)
        assert sleeper.activity == "sleeping"
        assert sleeper.where.endswith(f"deepspeed_user_job.py:{_hang_line()}")
        assert (waiter.activity, waiter.peer) == ("waiting", 1)
        assert waiter.op in ("send", "recv")
        assert "diagnosis: rank 0 waits on rank 1: stage 1 (rank 1) sleeps at" in status, status
        # where in the schedule: rank 1 in a forward pass, rank 0 in the exchange with it
        assert sleeper.at is not None and sleeper.at.text and "Forward" in sleeper.at.deepspeed_repr
        assert waiter.at is not None and waiter.at.deepspeed_repr.startswith(("Send", "Recv"))
        grid = follower.grid.figure.to_dict()
        pinned = next(t for t in grid["data"] if t.get("name") == "hang")
        cells = set(zip(pinned["y"], pinned["x"]))
        assert cells == {(sleeper.at.stage, sleeper.at.step), (waiter.at.stage, waiter.at.step)}
        assert "HUNG: rank 0 wait" in grid["layout"]["title"]["text"]
        assert len(grid["layout"]["annotations"]) >= 1  # the wait drawn from rank 0 to rank 1
        # the automatic diagnosis ran once for this stall, the history kept the moment it began
        assert any(h.get("stalled_s") for h in follower.history)
    finally:
        seen = seen or [p.pid for p in tree(proc.pid)]
        stop_launcher(proc)
        for pid in seen[1:]:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 30
    while any(process_alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(process_alive(p) for p in seen)
