"""``explorer doctor`` on real hung jobs (gloo, CPU), each planted and started by the test.

Each job runs with a stall timeout of 10 minutes, so nothing but the test ends it. The test
waits for the hang itself to be visible (every waiting rank's live stack shows its wait, the
planted rank shows its fault) and only then asks for the verdict: how long the job takes to
get there on a busy machine changes when the test looks, never what it sees. Every process
is killed at the end, launcher and ranks, and checked gone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.runtime import Fault, RunSpec
from explorer.pipeline.runtime.doctor import Diagnosis, doctor
from explorer.processes import free_port, rank_env
from explorer.processes.stacks import tree
from tests.pipeline.conftest import alive, read_again_from_the_folder

#: A back-stop for reaching the hang (imports and rendezvous of 2-3 ranks on a busy machine).
REACH_S = 240.0
LAUNCHER = """
import sys, json
from explorer.pipeline.runtime import RunSpec, run_pipeline
spec = RunSpec.from_json(json.loads(open(sys.argv[2]).read()))
run_pipeline(spec, sys.argv[1], check_first=False)
"""


def _line_of(text: str) -> int:
    """The line of the explorer's executor holding ``text`` (the planted fault's sleep)."""
    import explorer.pipeline.runtime as runtime

    source = Path(runtime.__file__).with_name("executor.py").read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


def _launch(spec: RunSpec, folder: Path) -> subprocess.Popen:
    """A launcher process, as a user's script would be: it starts the ranks and watches them."""
    spec_file = folder.parent / f"{folder.name}-spec.json"
    spec_file.write_text(json.dumps(spec.to_json()))
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCHER, str(folder), str(spec_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _until(pids: list[int], ready: Callable[[Diagnosis], bool], **kw) -> Diagnosis:
    """The first diagnosis for which ``ready`` holds (the hang visible), polled until REACH_S."""
    deadline = time.monotonic() + REACH_S
    last = None
    while time.monotonic() < deadline:
        try:
            last = doctor(pids, **kw)
        except Exception as exc:  # ranks not started yet: the tree holds no rank
            last = exc
        else:
            assert not last.refused, last.refused  # this machine forbids reading the ranks
            if ready(last):
                return last
        time.sleep(0.5)
    raise AssertionError(f"the hang never became visible in {REACH_S:.0f} s: {last}")


def _kill_all(procs: list[int]) -> None:
    for pid in procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def jobs():
    """Starts nothing; kills (and checks gone) every process tree registered with it."""
    launched: list[subprocess.Popen] = []
    ranks: list[subprocess.Popen] = []
    yield launched, ranks
    seen = []
    for launcher in launched:
        below = [p.pid for p in tree(launcher.pid)][1:]
        seen += below + [launcher.pid]
        _kill_all(below)
        launcher.kill()
        launcher.wait(timeout=30)
    for proc in ranks:
        seen.append(proc.pid)
        proc.kill()
        proc.wait(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(p) for p in seen) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in seen)


def _waiting(d: Diagnosis, peers: dict[int, int], op: str = "") -> bool:
    """True when each rank of ``peers`` waits on its given peer (in ``op``, when given).

    A wait on a peer that can never answer (asleep, gone) or two sends facing each other is
    permanent, so the condition cannot pass on a moment of a healthy job (a start-up barrier, an
    exchange under way) and then change.
    """
    states = {s.rank: s for s in d.verdict.ranks}
    return all(
        r in states
        and states[r].activity == "waiting"
        and states[r].peer == peer
        and states[r].op == (op or states[r].op)
        for r, peer in peers.items()
    )


def _placed(d: Diagnosis, ranks: Iterable[int]) -> bool:
    """True when each of ``ranks`` is placed at an instruction of the run's schedule.

    One diagnosis on a fresh clone named both ranks waiting in their sends with no schedule to
    place them in (both stages unknown: the run's spec was not read at that moment; why was not
    found). The waits are permanent, so a test of the schedule's words polls until they are there
    too; a doctor that never places them still fails it, after ``REACH_S``.
    """
    return all(d.verdict.state(r).at is not None for r in ranks)


def _a_copy_is_not_the_live_job(folder: Path, copy: Path) -> None:
    """A ``cp -r`` of the live run names the live ranks' pids, but those processes write the
    original: the copy's doctor reads no stack of theirs (it once read them, saw the copy's
    files stand still and called the original's waits a hang of the copy)."""
    shutil.copytree(folder, copy)
    d = doctor([], folder=copy)
    assert d.folder == copy and d.live == 0, d.to_dict()
    assert not [s.rank for s in d.verdict.ranks if s.source == "stack"], d.verdict.describe()


@pytest.mark.slow
def test_a_rank_sleeping_on_purpose_is_the_rank_everyone_waits_on(tmp_path, jobs):
    schedule = build("deepspeed-train", 3, 6)
    spec = RunSpec.for_schedule(schedule, fault=Fault(1, 4, "hang"), stall_timeout_s=600)
    folder = tmp_path / "run"
    launcher = _launch(spec, folder)
    jobs[0].append(launcher)

    def ready(d: Diagnosis) -> bool:
        states = {s.rank: s for s in d.verdict.ranks}
        return _waiting(d, {0: 1, 2: 1}) and 1 in states and bool(states[1].note)

    ready_at = _until([launcher.pid], ready, save=tmp_path / "saved")
    assert ready_at.folder == folder  # found from the ranks' command lines
    _a_copy_is_not_the_live_job(folder, tmp_path / "copy")
    read_again_from_the_folder(tmp_path / "saved", ready_at.verdict)
    out = subprocess.run(
        [sys.executable, "-m", "explorer", "doctor", str(launcher.pid), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    got = json.loads(out.stdout)
    assert (got["kind"], got["verdict"], got["culprit"], got["waiting"]) == (
        "hang",
        "waits-on",
        1,
        [0, 2],
    )
    culprit = got["ranks"][1]
    assert culprit["activity"] == "sleeping"
    assert culprit["where"].endswith(f"executor.py:{_line_of('time.sleep(3600)')}")
    first = schedule.stream(1)[4][0]  # where rank 1 stopped: the first instruction of step 4
    assert culprit["instruction"]["step"] == 4
    assert culprit["instruction"]["text"] == str(first)
    for rank in (0, 2):
        waiter = got["ranks"][rank]
        assert (waiter["activity"], waiter["peer"]) == ("waiting", 1)
        assert waiter["op"] in ("send", "recv")
        assert waiter["instruction"]["instruction"].startswith(("Send", "Recv"))
    assert "wait on rank 1: stage 1 (rank 1) sleeps at" in got["description"]


@pytest.mark.slow
def test_a_schedule_that_deadlocks_under_blocking_p2p_is_named_as_its_cycle(tmp_path, jobs):
    s = build("1f1b", 2, 4)
    blocking = s.replace(params={**s.params, "p2p": "blocking"})
    launcher = _launch(RunSpec.for_schedule(blocking, stall_timeout_s=600), tmp_path / "run")
    jobs[0].append(launcher)
    d = _until(
        [launcher.pid],
        lambda d: _waiting(d, {0: 1, 1: 0}, "send") and _placed(d, (0, 1)),
        save=tmp_path / "s",
    )
    v = d.verdict
    read_again_from_the_folder(tmp_path / "s", v)
    assert (v.verdict, v.cycle) == ("cycle", (0, 1))
    zero, one = v.state(0), v.state(1)
    assert (zero.op, zero.peer, one.op, one.peer) == ("send", 1, "send", 0)
    # the same instructions the analysis names before launch
    expected = check(blocking, other_model=False).findings.deadlock
    assert expected is not None and v.deadlock is not None
    assert [w.at for w in v.deadlock.cycle] == [w.at for w in expected.cycle]
    assert v.describe().startswith(
        "wait-for cycle: stage 0 (rank 0) waits in SendActivation of micro-batch 1"
    )
    assert "stage 1 (rank 1) waits in SendGrad of micro-batch 0" in v.describe()


USER_SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
peer = 1 - dist.get_rank()
grad = torch.zeros(4)
dist.recv(grad, src=peer)  # each rank waits for the other's gradient first: neither sends
"""
USER_LAUNCHER = """
import subprocess, sys
from explorer.processes import free_port, rank_env
port = free_port()
ranks = [subprocess.Popen([sys.executable, sys.argv[1]], env=rank_env(r, 2, port, threads=1)) for r in range(2)]
for p in ranks:
    p.wait()
"""


@pytest.mark.slow
def test_a_users_own_script_that_deadlocks_is_named_by_its_file_line_and_call(tmp_path, jobs):
    """No engine, no run folder: the cycle in torch.distributed's words and the user's line."""
    script = tmp_path / "train.py"
    script.write_text(USER_SCRIPT)
    launcher = subprocess.Popen(
        [sys.executable, "-c", USER_LAUNCHER, str(script)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    jobs[0].append(launcher)
    d = _until([launcher.pid], lambda d: _waiting(d, {0: 1, 1: 0}, "recv"), save=tmp_path / "s")
    v = d.verdict
    read_again_from_the_folder(tmp_path / "s", v)
    assert (v.verdict, v.cycle, d.folder) == ("cycle", (0, 1), None)
    line = next(i for i, t in enumerate(USER_SCRIPT.splitlines(), 1) if "dist.recv" in t)
    assert [v.state(r).where for r in (0, 1)] == [f"{script}:{line}"] * 2
    assert v.describe() == (
        "wait-for cycle: rank 0 waits in dist.recv from rank 1; rank 1 waits in dist.recv from rank 0"
    )


@pytest.mark.slow
def test_the_same_deadlock_on_deepspeeds_engine_is_read_from_its_exec_frames(tmp_path, jobs):
    """DeepSpeed's ``PipelineEngine`` replaying the order: its ``_exec_*`` frames name kind and buffer."""
    s = build("1f1b", 2, 4)
    blocking = s.replace(params={**s.params, "p2p": "blocking"})
    spec = RunSpec.for_schedule(blocking, stall_timeout_s=600, engine="deepspeed")
    launcher = _launch(spec, tmp_path / "run")
    jobs[0].append(launcher)
    d = _until(
        [launcher.pid],
        lambda d: _waiting(d, {0: 1, 1: 0}, "send") and _placed(d, (0, 1)),
        save=tmp_path / "s",
    )
    v = d.verdict
    read_again_from_the_folder(tmp_path / "s", v)
    assert (v.verdict, v.cycle) == ("cycle", (0, 1))
    expected = check(blocking, other_model=False).findings.deadlock
    assert expected is not None and v.deadlock is not None
    assert [w.at for w in v.deadlock.cycle] == [w.at for w in expected.cycle]
    assert [v.state(r).engine for r in (0, 1)] == ["deepspeed", "deepspeed"]
    assert [v.state(r).op for r in (0, 1)] == ["send", "send"]


@pytest.mark.slow
def test_a_rank_killed_with_sigkill_is_named_gone_from_what_it_wrote(tmp_path, jobs):
    """On gloo the killed rank's neighbours notice the closed connection and end too, each
    writing where it waited; a neighbour still alive waits on the dead rank in its stack.
    Either way they wait on rank 1, and rank 1 is gone after the last step it wrote."""
    schedule = build("deepspeed-train", 3, 6)
    folder = tmp_path / "run"
    folder.mkdir()
    spec = RunSpec.for_schedule(
        schedule, fault=Fault(1, 4, "kill"), stall_timeout_s=600, run_id="doctor-kill"
    )
    spec.write(folder)
    port = free_port()
    ranks = [  # started as torchrun starts its workers, with nothing watching them
        subprocess.Popen(
            [sys.executable, "-m", "explorer.pipeline.runtime.worker", str(folder)],
            env=rank_env(r, 3, port, threads=1),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for r in range(3)
    ]
    jobs[1].extend(ranks)
    assert ranks[1].wait(timeout=REACH_S) == -signal.SIGKILL
    pids = [p.pid for p in ranks]
    live = _until(pids, lambda d: _waiting(d, {0: 1, 2: 1}), folder=folder, save=tmp_path / "s")
    read_again_from_the_folder(tmp_path / "s", live.verdict)  # rank 1 saved as gone, with its log
    out = subprocess.run(
        [sys.executable, "-m", "explorer", "doctor", *map(str, pids), "--folder", str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    verdict = next(line for line in out.stdout.splitlines() if line.startswith("verdict:"))
    first = schedule.stream(1)[4][0]  # rank 1 died before running step 4
    assert verdict.startswith(
        f"verdict: ranks 0, 2 wait on rank 1: stage 1 (rank 1) is gone "
        f"(last in {first.kind.deepspeed_name} of micro-batch {first.microbatch} (step 4,"
    ), out.stdout
    # gloo ends the neighbours once their exchange with the dead rank fails; each writes where it
    # waited, so the folder alone says the same once every rank has ended
    assert [ranks[r].wait(timeout=REACH_S) for r in (0, 2)] == [1, 1]
    after = doctor([], folder).verdict
    assert (after.verdict, after.culprit, after.waiting) == ("waits-on", 1, (0, 2))
    assert after.state(1).activity == "gone" and after.state(1).at is not None
    assert after.state(1).at.step == 4
