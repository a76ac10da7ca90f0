"""A rank stopped by a signal (``kill -STOP``, a stray Ctrl-Z), read live by the doctor.

A stopped process keeps the stack it had: read alone, rank 1 below "computes" or "sleeps" where
it stood, as if it would go on. Its process state (T) says it will not: the doctor names it as
the rank the other waits on, stopped by a signal. A real 2-rank gloo job: rank 1 stops itself
before its send, rank 0 waits in the matching receive.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from explorer.errors import InputError
from explorer.pipeline.runtime.doctor import doctor
from explorer.processes import free_port, process_state, rank_env
from tests.pipeline.conftest import alive

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


def test_the_doctor_names_a_stopped_rank_as_the_one_the_others_wait_on(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(JOB)
    port = free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script)],
            env=rank_env(r, 2, port, threads=1),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(2)
    ]
    try:
        verdict = None
        deadline = time.monotonic() + REACH_S
        while time.monotonic() < deadline:
            if process_state(ranks[1].pid) == "T":
                try:
                    verdict = doctor([p.pid for p in ranks]).verdict
                except InputError:  # ranks not readable yet
                    verdict = None
                if verdict is not None and verdict.state(0).activity == "waiting":
                    break
            time.sleep(0.3)
        assert verdict is not None, "rank 1 never stopped, or rank 0 never reached its receive"
    finally:
        for p in ranks:
            p.kill()
            p.wait(timeout=30)
    assert not any(alive(p.pid) for p in ranks)
    assert (verdict.verdict, verdict.culprit, verdict.waiting) == ("waits-on", 1, (0,))
    stopped = verdict.state(1)
    assert stopped.activity == "stopped"
    assert stopped.where.endswith(f"train.py:{STOP_LINE}"), stopped.where
    assert verdict.describe().startswith(
        "rank 0 wait on rank 1: rank 1 stands stopped by a signal (SIGSTOP, SIGTSTP or Ctrl-Z; "
        "state T) at "
    ), verdict.describe()
