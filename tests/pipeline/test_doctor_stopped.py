"""A rank that does not move for a reason of its own, read live by the doctor: stopped by a
signal (``kill -STOP``, a stray Ctrl-Z), or still compiling.

A stopped process keeps the stack it had: read alone, rank 1 below "computes" or "sleeps" where
it stood, as if it would go on. Its process state (T) says it will not: the doctor names it as
the rank the other waits on, stopped by a signal. A real 2-rank gloo job: rank 1 stops itself
before its send, rank 0 waits in the matching receive.

A rank still in torch.compile's first compile while its neighbour waits is slow, not hung: the
doctor says so, and the job then finishes. Its compile is made slow by a backend that waits for
a file the test writes once the doctor has seen it (a compile as slow as needed, and no race).
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis.hang import HangVerdict
from explorer.pipeline.runtime.doctor import doctor
from explorer.processes import free_port, rank_env
from tests.pipeline.conftest import alive, read_again_from_the_folder

pytestmark = pytest.mark.slow

#: A back-stop for reaching the stop (imports and rendezvous on a busy machine).
REACH_S = 240.0
JOB = """
import os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo")
grad = torch.zeros(4)
if dist.get_rank() == 1:
    os.kill(os.getpid(), signal.SIGSTOP)  # stands here until continued
    dist.send(grad, 0)
else:
    dist.recv(grad, 1)
"""
STOP_LINE = next(i for i, t in enumerate(JOB.splitlines(), 1) if "signal.SIGSTOP" in t)
COMPILING_JOB = """
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
grad = torch.zeros(4)

def slow_backend(gm, example_inputs):  # a first compile that takes as long as the test wants
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.05)
    return gm.forward

if dist.get_rank() == 1:
    grad = torch.compile(lambda t: t * 2 + 1, backend=slow_backend)(grad)
    dist.send(grad, 0)
else:
    dist.recv(grad, 1)
"""


def _start(script, *args: str) -> list[subprocess.Popen]:
    port = free_port()
    return [
        subprocess.Popen(
            [sys.executable, str(script), *args],
            env=rank_env(r, 2, port, threads=1),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(2)
    ]


def _diagnosed(ranks: list[subprocess.Popen], ready, saved) -> HangVerdict:
    """The doctor's verdict once ``ready(verdict)`` (rank 0 in its receive, rank 1 as wanted);
    the stacks it read are saved to ``saved`` and must give it again from the folder alone."""
    deadline = time.monotonic() + REACH_S
    verdict = None
    while time.monotonic() < deadline:
        try:
            verdict = doctor([p.pid for p in ranks], save=saved).verdict
        except InputError:  # ranks not readable yet
            verdict = None
        if verdict is not None and verdict.state(0).activity == "waiting" and ready(verdict):
            read_again_from_the_folder(saved, verdict)
            return verdict
        time.sleep(0.3)
    raise AssertionError(f"not reached in {REACH_S:.0f} s: {verdict}")


def _end(ranks: list[subprocess.Popen]) -> None:
    for p in ranks:
        p.kill()
        p.wait(timeout=30)
    assert not any(alive(p.pid) for p in ranks)


def test_the_doctor_names_a_stopped_rank_as_the_one_the_others_wait_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(JOB)
    ranks = _start(script)
    try:
        # ready on what the doctor saw, not on the process now: a verdict read while both ranks
        # were still in their rendezvous, with rank 1 stopped a moment later, was no-wait
        verdict = _diagnosed(ranks, lambda v: v.state(1).activity == "stopped", tmp_path / "s")
    finally:
        _end(ranks)
    assert (verdict.verdict, verdict.culprit, verdict.waiting) == ("waits-on", 1, (0,))
    stopped = verdict.state(1)
    assert stopped.activity == "stopped"
    assert stopped.where.endswith(f"train.py:{STOP_LINE}"), stopped.where
    assert verdict.describe().startswith(
        "rank 0 waits on rank 1: rank 1 stands stopped by a signal (SIGSTOP, SIGTSTP or Ctrl-Z; "
        "state T) at "
    ), verdict.describe()


def test_a_rank_still_compiling_is_said_compiling_and_the_job_then_finishes(tmp_path):
    script, go = tmp_path / "train.py", tmp_path / "go"
    script.write_text(COMPILING_JOB)
    ranks = _start(script, str(go))
    try:
        verdict = _diagnosed(ranks, lambda v: v.state(1).activity == "compiling", tmp_path / "s")
        go.touch()  # the compile ends: the job goes on, the receive completes
        codes = [p.wait(timeout=REACH_S) for p in ranks]
    finally:
        _end(ranks)
    assert (verdict.verdict, verdict.culprit, verdict.waiting) == ("waits-on", 1, (0,))
    assert verdict.describe().startswith(
        "rank 0 waits on rank 1: rank 1 is still compiling (torch.compile) at "
    ), verdict.describe()
    assert verdict.state(1).where.startswith(str(script)), "the user's own line, not torch's"
    assert codes == [0, 0], "slow, not hung: once compiled, rank 1 sends and both finish"
