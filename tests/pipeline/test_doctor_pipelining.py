"""A ``torch.distributed.pipelining`` job that hangs, read live by the doctor in the schedule's words.

A user's own 2-rank job (gloo, CPU, no explorer inside), one schedule class each test: the first
stage's module sleeps in its forward of micro-batch 2 (the planted hang: that micro-batch's rows
carry a mark). The other rank waits in PyTorch's
batched P2P wait; the doctor reads, from the schedule's own frame, the transfer it waits for (the
``desc`` of its ops), the micro-batch (and for the multi-stage runtime the action's place in the
order and its stage), and so the rank it waits on: the verdict names the sleeper and where in
the schedule it sleeps.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis.hang import HangVerdict
from explorer.pipeline.runtime.doctor import NO_STACK, doctor
from explorer.processes import free_port, rank_env
from explorer.processes.stacks import py_spy
from tests.pipeline.conftest import alive, read_again_from_the_folder

pytestmark = pytest.mark.slow

REACH_S = 240.0
JOB = """
import datetime, os, sys, time, torch, torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S

own_timeout = os.environ.get("JOB_TIMEOUT_S_RANK" + os.environ.get("RANK", ""), "1800")
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(own_timeout)))
rank, world = dist.get_rank(), dist.get_world_size()
kind = sys.argv[1]
per_rank = 2 if kind == "runtime" else 1
n = world * per_rank
torch.manual_seed(0)


class Layer(torch.nn.Module):
    def __init__(self, first):
        super().__init__()
        self.lin, self.first = torch.nn.Linear(16, 16), first

    def forward(self, x):
        if self.first and x.device.type != "meta" and bool(x[0, 0] == MARK):
            time.sleep(3600)  # the planted hang: the first stage's forward of micro-batch 2
        return self.lin(x)


MARK = 1000.0
layers = [Layer(s == 0) for s in range(n)]
mine = [s for s in range(n) if s % world == rank]
stages = []
for s in mine:
    stage = PipelineStage(layers[s], s, n, torch.device("cpu"))
    stage._get_init_p2p_neighbors_ops = lambda: []  # torch 2.9's handshake aborts on gloo
    stages.append(stage)
loss = lambda y, t: ((y - t) ** 2).mean()
if kind == "1f1b":
    sched = S.Schedule1F1B(stages[0], 4, loss_fn=loss)
elif kind == "csv":  # an order edited into a cycle, loaded as PyTorch loads a CSV
    sched = S._PipelineScheduleRuntime(stages, 4, loss_fn=loss)
    sched._load_csv(sys.argv[2], format="compute_comms")
else:
    sched = S._PipelineScheduleRuntime(stages, 4, loss_fn=loss)
    order = S.ScheduleInterleaved1F1B(stages, 4, loss_fn=loss).pipeline_order
    sched._prepare_schedule_with_comms({r: [a for a in acts if a] for r, acts in order.items()})
x, target = torch.randn(16, 16), torch.randn(16, 16)
x[8:12] = MARK  # micro-batch 2 of 4 (rows 8 to 11)
sched.step(*((x,) if 0 in mine else ()), **({"target": target} if n - 1 in mine else {}))
"""
SLEEP_LINE = next(i for i, t in enumerate(JOB.splitlines(), 1) if "time.sleep(3600)" in t)


#: An order with its transfers (``compute_comms``, which PyTorch loads without simulating it; a
#: compute-only order that cannot finish is refused by its lowering pass). Rank 0 runs each
#: backward right after its forward; rank 1 runs two forwards before its first backward. Rank 0
#: waits for micro-batch 0's gradient before it sends micro-batch 1's activation; rank 1 waits
#: for that activation before it sends the gradient: a wait-for cycle.
CYCLE_CSV = (
    ",".join(f"0F{m},0SEND_F{m},0RECV_B{m},0B{m}" for m in range(4))
    + "\n"
    + ",".join(
        f"1RECV_F{a},1F{a},1RECV_F{b},1F{b},1B{a},1SEND_B{a},1B{b},1SEND_B{b}"
        for a, b in ((0, 1), (2, 3))
    )
    + "\n"
)


def _sleeper_and_final_wait(verdict: HangVerdict) -> bool:
    """Rank 0 asleep in micro-batch 2 and rank 1 in its wait for that micro-batch: where the job
    stays. A moment earlier rank 1 may still be in the wait for micro-batch 1 (its data already
    sent, the rank not yet scheduled on a busy machine): not the hang, so not the verdict."""
    return (
        verdict.culprit == 0
        and verdict.state(0).activity == "sleeping"
        and "micro-batch 2, waiting for" in verdict.state(1).note
    )


def _hung(tmp_path, kind: str, ready=None) -> HangVerdict:
    """The live verdict once the job hangs for good. At that moment the ranks' stacks are also
    saved (``doctor --save``) and dumped as a person would (``py-spy dump --locals``, one text
    file per rank); once the job is gone, both folders must give the live verdict again."""
    script, csv = tmp_path / "train.py", tmp_path / "order.csv"
    script.write_text(JOB)
    csv.write_text(CYCLE_CSV)
    ready = ready or _sleeper_and_final_wait
    port = free_port()
    ranks = [
        subprocess.Popen(
            [sys.executable, str(script), kind, str(csv)],
            env=rank_env(r, 2, port, threads=1),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(2)
    ]
    verdict = None
    try:
        deadline = time.monotonic() + REACH_S
        while time.monotonic() < deadline:
            assert all(p.poll() is None for p in ranks), "a rank ended: the job did not hang"
            try:
                verdict = doctor([p.pid for p in ranks]).verdict
            except InputError:  # ranks not readable yet
                verdict = None
            # the hang for good (rank 0 in its sleep, or the cycle), not a moment of a job moving
            if verdict is not None and ready(verdict):
                _dump_as_a_person_would(ranks, tmp_path / "pyspy")
                saved = doctor([p.pid for p in ranks], save=tmp_path / "saved").verdict
                if ready(saved):  # the same moment as the dumps: the job stays there
                    break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the hang never became visible in {REACH_S:.0f} s: {verdict}")
    finally:
        for p in ranks:
            p.kill()
            p.wait(timeout=30)
        assert not any(alive(p.pid) for p in ranks)
    read_again_from_the_folder(tmp_path / "saved", saved)
    read_again_from_the_folder(tmp_path / "pyspy", saved)
    return saved


def _dump_as_a_person_would(ranks, folder) -> None:
    folder.mkdir(exist_ok=True)
    for r, p in enumerate(ranks):
        out = subprocess.run(
            [py_spy(), "dump", "--pid", str(p.pid), "--locals", "--nonblocking"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        (folder / f"rank{r}.txt").write_text(out.stdout)


def test_a_hung_1f1b_job_names_the_sleeping_first_stage_and_what_the_last_waits_for(tmp_path):
    verdict = _hung(tmp_path, "1f1b")
    assert (verdict.verdict, verdict.waiting) == ("waits-on", (1,))
    sleeper, waiter = verdict.state(0), verdict.state(1)
    assert (waiter.activity, waiter.op, waiter.peer, waiter.engine) == (
        "waiting",
        "wait",
        0,
        "torch",
    )
    assert waiter.note == (
        "PyTorch pipelining: micro-batch 2, waiting for the activation from the previous stage "
        "(bwd_send_fwd_recv)"
    ), waiter.note
    assert sleeper.activity == "sleeping" and sleeper.where.endswith(f"train.py:{SLEEP_LINE}")
    assert sleeper.note == "PyTorch pipelining: forward, micro-batch 2", sleeper.note
    assert verdict.describe().startswith("rank 1 waits on rank 0: rank 0 sleeps at ")


def test_a_hung_runtime_job_names_the_action_its_stage_and_the_rank_it_waits_on(tmp_path):
    """``_PipelineScheduleRuntime`` (what ``_load_csv`` orders run on), two stages per rank:
    stages 0 and 2 on rank 0, 1 and 3 on rank 1. Which stage rank 0 stands at is read from its
    frame, so rank 1's wait on stage 0 is a wait on rank 0 without knowing the placement."""
    verdict = _hung(tmp_path, "runtime")
    sleeper, waiter = verdict.state(0), verdict.state(1)
    assert (verdict.verdict, verdict.waiting, waiter.peer) == ("waits-on", (1,), 0)
    assert waiter.note.startswith("PyTorch pipelining: action #"), waiter.note
    assert "stage 1, micro-batch 2, waiting for the activation from the previous stage" in (
        waiter.note
    )
    assert sleeper.note.startswith("PyTorch pipelining: action #") and sleeper.note.endswith(
        "stage 0, forward, micro-batch 2"
    ), sleeper.note


def test_an_order_edited_into_a_cycle_is_named_as_the_cycle_between_the_two_waits(tmp_path):
    """PyTorch #172668's kind of case: an order that no run can finish, loaded through
    ``_load_csv`` as a user edits one. Both ranks wait in PyTorch's P2P wait; the transfers they
    wait for close the loop."""
    # the cycle for good: rank 1 waiting for micro-batch 1 (a moment earlier both may wait on
    # micro-batch 0's transfers, already under way)
    verdict = _hung(
        tmp_path,
        "csv",
        ready=lambda v: v.verdict == "cycle" and "micro-batch 1, waiting" in v.state(1).note,
    )
    assert set(verdict.cycle) == {0, 1}
    first, last = verdict.state(0), verdict.state(1)
    assert (first.peer, last.peer) == (1, 0)
    assert "micro-batch 0, waiting for the gradient from the next stage (bwd_recv)" in first.note
    assert "micro-batch 1, waiting for the activation from the previous stage (fwd_recv)" in (
        last.note
    ), last.note
    assert verdict.describe().startswith("wait-for cycle: ")


def test_a_job_that_died_of_its_hang_is_diagnosed_from_the_tracebacks_in_its_logs(tmp_path):
    """After the fact, from what the job printed: the 1F1B job under torchrun with a short
    process-group timeout. Rank 1's wait times out and prints its traceback; torchrun then ends
    rank 0 (asleep in its forward), which prints nothing. torchrun's per-rank logs
    (``--log-dir``) and its console output each say: rank 1 waited for the activation from the
    previous stage, on rank 0, which left no stack."""
    script, logs, console = tmp_path / "train.py", tmp_path / "logs", tmp_path / "console"
    script.write_text(JOB)
    console.mkdir()
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2"]
    tee = [
        "--log-dir",
        str(logs),
        "--redirects",
        "3",
        "--tee",
        "3",
        "--master-port",
        str(free_port()),
    ]
    # only rank 1's waits time out: whichever of its waits ends first, it waited on rank 0, and
    # rank 0 (which never times out) cannot end on a wait of its own on a slow machine
    env = {**os.environ, "JOB_TIMEOUT_S_RANK1": "8", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [*torchrun, *tee, str(script), "1f1b"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode != 0, "the job should have died of its hang"
    (console / "job.log").write_text(done.stdout + done.stderr)
    for folder in (logs, console):
        diagnosis = doctor([], folder)
        verdict = diagnosis.verdict
        assert diagnosis.source == "stacks" and (verdict.verdict, verdict.culprit) == (
            "waits-on",
            0,
        )
        sleeper, waiter = verdict.state(0), verdict.state(1)
        assert (sleeper.activity, sleeper.note) == ("unseen", NO_STACK), sleeper
        assert (waiter.activity, waiter.op, waiter.peer, waiter.source) == (
            "waiting",
            "wait",
            0,
            "traceback",
        ), waiter
        assert "waiting for the activation from the previous stage" in waiter.note, waiter.note
        assert "Timed out" in waiter.note and waiter.describe().startswith("rank 1 waited in")
