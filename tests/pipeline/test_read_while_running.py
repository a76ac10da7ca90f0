"""A run folder read before its run has ended, or after its launcher died with it.

``read``, ``check``, ``run --collect`` and ``doctor`` are four ways of asking about one folder;
they must give one answer. ``read`` of a live run said "failed" (its ranks had written no end
yet), and with the launcher killed (no exit codes kept) it blamed the rank that lost its peer
while ``doctor`` named the rank that was gone.

Whether a run goes on is the kernel's answer, not a guess from a pid: its launcher holds an
exclusive ``flock`` on ``run.lock`` for the whole run. The stand-in launcher below takes that
lock as the real one does, on a copy of a real run's folder.
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

import pytest
from cli_in_process import asked_four_ways, call_cli
from run_lock import StandIn

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _mid_run_copy(source: Path, dest: Path, keep: int) -> str:
    """A copy of a finished run's folder as it stood mid-run: each rank file's first ``keep``
    lines, no result and no exit codes yet. Returns the run id."""
    folder = Path(shutil.copytree(source, dest))
    for name in ("result.json", "exit_codes.json", "run.lock"):
        (folder / name).unlink(missing_ok=True)
    for rank_file in folder.glob("rank*.jsonl"):
        lines = rank_file.read_text().splitlines(keepends=True)
        rank_file.write_text("".join(lines[:keep]))
    return json.loads((folder / "spec.json").read_text())["run_id"]


def test_a_run_read_while_it_runs_is_running_not_failed(tmp_path):
    """read of a live run said "failed: rank 0 has no record of finishing this run"."""
    out = tmp_path / "live"
    job, pids = _moving_job(out)
    try:
        said = asked_four_ways(out)
        alive = job.poll() is None and not any(_ended(pid) for pid in pids.values())
    finally:
        _kill_all(job, pids)
    assert alive, "the run ended while it was read (a stalled machine?)"
    assert {k: c.returncode for k, c in said.items()} == dict.fromkeys(said, 1)
    assert said["read"].stdout.startswith("running: the run is still running"), said["read"]
    assert "but the run has not ended" in said["check"].stdout, said["check"].stdout
    assert "failed" not in said["read"].stdout + said["check"].stdout
    doc = json.loads(said["json"].stdout)
    assert doc["ok"] is False and doc["failure"]["kind"] == "running"
    assert f"pid {job.pid}" in doc["failure"]["message"]
    assert "rank 0 at iteration" in doc["failure"]["message"], doc["failure"]


def test_a_folder_whose_ranks_never_wrote_is_starting_then_refused_by_every_command(
    cli_1f1b_run, tmp_path
):
    """A run stopped before its ranks wrote a line left spec.json alone: ``run --collect``
    called it failed (exit 1) where ``read``, ``check`` and ``doctor`` refused it (exit 2).
    While its launcher holds the folder it is starting, for all four."""
    folder = tmp_path / "starting"
    run_id = _mid_run_copy(Path(cli_1f1b_run.folder), folder, keep=0)
    for rank_file in folder.glob("rank*"):
        rank_file.unlink()
    launcher = StandIn(folder, run_id)
    try:
        said = asked_four_ways(folder)
        assert {k: c.returncode for k, c in said.items()} == dict.fromkeys(said, 1), said
        doc = json.loads(said["json"].stdout)
        assert doc["failure"]["kind"] == "running"
        assert "rank 0 starting; rank 1 starting" in doc["failure"]["message"]
        assert (
            json.loads(call_cli(["doctor", str(folder), "--json"]).stdout)["verdict"] == "starting"
        )
    finally:
        launcher.end()
    said = {
        name: call_cli(argv)
        for name, argv in {
            "read": ["read", str(folder)],
            "check": ["check", str(folder)],
            "collect": ["run", "--collect", str(folder)],
            "doctor": ["doctor", str(folder)],
        }.items()
    }
    assert {k: c.returncode for k, c in said.items()} == dict.fromkeys(said, 2)
    # one refusal, worded alike by all four (doctor once said it in words of its own)
    reasons = {
        k: c.stderr.strip().split(": error: ", 1)[-1].split(" holds ", 1)[-1]
        for k, c in said.items()
    }
    assert len(set(reasons.values())) == 1, reasons
    assert reasons["read"].startswith("spec.json but no rank<R>.jsonl: no rank of the run wrote")
    assert not any("Traceback" in c.stderr for c in said.values())


def _start_line(path: Path) -> dict:
    return json.loads(path.read_text().splitlines()[0])


def _ended(pid: int) -> bool:
    """Gone, or a zombie its (stopped or killed) parent has not reaped."""
    from explorer.processes.ranks import process_state

    return process_state(pid) in (None, "Z", "X")


def _wait_ended(pids, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not all(_ended(pid) for pid in pids):
        assert time.monotonic() < deadline, f"rank processes {pids} did not end"
        time.sleep(0.1)


def _moving_job(out: Path) -> tuple[subprocess.Popen, dict[int, int]]:
    """``explorer run`` of a long 2-rank GPipe job, once both ranks are well into it; its
    launcher and each rank's pid (from their start lines)."""
    job = subprocess.Popen(
        [sys.executable, "-m", "explorer", "run", "--kind", "gpipe", "--stages", "2",
         "--microbatches", "16", "--iterations", "1000", "--out", str(out)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    pids: dict[int, int] = {}
    deadline = time.monotonic() + 300
    while len(pids) < 2 or len((out / "rank1.jsonl").read_bytes().splitlines()) < 40:
        assert job.poll() is None and time.monotonic() < deadline, "the job did not start"
        time.sleep(0.2)
        for rank in (0, 1):
            path = out / f"rank{rank}.jsonl"
            if rank not in pids and path.exists() and path.read_text().strip():
                pids[rank] = int(_start_line(path)["pid"])
    return job, pids


def _kill_all(job: subprocess.Popen, pids: dict[int, int]) -> None:
    for pid in [job.pid, *pids.values()]:
        try:
            os.kill(pid, signal.SIGKILL)
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    job.wait()


def test_with_the_launcher_stopped_every_command_names_the_rank_that_went(tmp_path):
    """Stop the launcher (it keeps its lock, writes no exit code), kill rank 1: rank 0 loses its
    peer and writes that. read once blamed rank 0's lost peer where doctor named rank 1, and a
    stopped launcher's lock kept the folder "running" after its ranks had ended. Now all four
    name rank 1 at its stage."""
    out = tmp_path / "lost"
    job, pids = _moving_job(out)
    try:
        os.kill(job.pid, signal.SIGSTOP)
        os.kill(pids[1], signal.SIGKILL)
        _wait_ended([pids[0]], 120)  # it loses its peer, says so, and ends
        assert not (out / "exit_codes.json").exists()  # its launcher kept none
        said = asked_four_ways(out)
        doctor = json.loads(call_cli(["doctor", str(out), "--json"]).stdout)
    finally:
        _kill_all(job, pids)
    doc = json.loads(said["json"].stdout)
    assert doc["failure"]["rank"] == 1 and doc["failure"]["stage"] == 1, doc["failure"]
    assert doc["failure"]["consequences"][0].startswith("rank 0: "), doc["failure"]
    assert said["read"].stdout.startswith("failed: rank 1 ended without a report")
    assert said["collect"].stdout == said["read"].stdout
    assert "rank 1, stage 1" in said["check"].stdout, said["check"].stdout
    assert doctor["culprit"] == 1 and doctor["waiting"] == [0], doctor["description"]


def test_a_killed_launchers_ranks_end_with_it(tmp_path):
    """Each rank leads its own process group, so a launcher killed from outside (SIGKILL, the
    OOM killer) took none with it: they ran on into a folder no one held, and a second run
    there read their late lines as its own. Each rank now ends once its launcher is gone."""
    out = tmp_path / "orphans"
    job, pids = _moving_job(out)
    try:
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
        _wait_ended(pids.values(), 60)  # the ranks look at their parent every 0.5 s
    finally:
        _kill_all(job, pids)
    # whichever rank went first (the other may write its lost peer): not "a file cut short"
    said = asked_four_ways(out)
    assert "ended without a" in said["read"].stdout, said["read"].stdout
    assert "no record of finishing" not in said["read"].stdout
    assert said["collect"].stdout == said["read"].stdout


def test_a_job_killed_outright_is_said_ended_from_outside(tmp_path):
    """Launcher and ranks killed at once (SIGKILL, the OOM killer): no rank wrote a word and no
    launcher kept their exit codes. ``read`` said "rank 0 has no record of finishing this run
    (rank0.jsonl missing, empty, cut short...)", sending the user after a damaged file."""
    out = tmp_path / "killed"
    job, pids = _moving_job(out)
    try:
        for pid in pids.values():  # stopped first, so no rank can see another go and say so
            os.kill(pid, signal.SIGSTOP)
    finally:
        _kill_all(job, pids)
    job.wait()
    _wait_ended(pids.values(), 60)
    said = asked_four_ways(out)
    assert said["read"].stdout.startswith(
        "failed: ranks 0, 1 ended without a word and no launcher kept how"
    ), said["read"].stdout
    assert "its launcher killed" in said["read"].stdout
    assert said["collect"].stdout == said["read"].stdout
    assert "ranks 0, 1 ended without a word" in said["check"].stdout, said["check"].stdout
    assert {k: c.returncode for k, c in said.items()} == dict.fromkeys(said, 1)
    assert json.loads(said["json"].stdout)["failure"]["kind"] == "unfinished"
    read = call_cli(["read", str(out)])  # no lock holder, no rank left: it has ended
    assert read.returncode == 1 and read.stdout.startswith("failed: "), read.stdout


def test_a_terminated_run_ends_its_ranks_and_says_so(tmp_path):
    """``kill`` or ``timeout`` (SIGTERM) ended only the launcher; it now unwinds as Ctrl-C
    does: its ranks are ended, and it exits 128 + 15 with one line."""
    out = tmp_path / "terminated"
    job, pids = _moving_job(out)
    try:
        os.kill(job.pid, signal.SIGTERM)
        code = job.wait(timeout=120)
        _wait_ended(pids.values(), 60)
    finally:
        _kill_all(job, pids)
    assert code == 143 and job.stderr is not None
    assert job.stderr.read().strip() == "explorer run: ended by SIGTERM"
    # how the ranks ended is kept: read says the run was interrupted, not "no record"
    said = call_cli(["read", str(out), "--json"])
    doc = json.loads(said.stdout)
    assert said.returncode == 1 and doc["failure"]["kind"] == "unfinished", doc["failure"]
    assert doc["failure"]["message"].startswith("the run was interrupted (SIGTERM to its launcher)")


@pytest.mark.parametrize("what", ["folder", "fifo", "symlink"])
def test_a_run_lock_that_is_no_file_is_refused_in_one_line(tmp_path, what):
    """A folder, FIFO or symlink where run.lock goes gave a traceback (or blocked), and a
    symlink's target was truncated and written over."""
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    lock = out / "run.lock"
    if what == "folder":
        lock.mkdir()
    elif what == "fifo":
        os.mkfifo(lock)
    else:
        lock.symlink_to(target)
    said = call_cli(["run", "--kind", "1f1b", "--stages", "2", "--microbatches", "2",
                     "--out", str(out)])  # fmt: skip
    assert said.returncode == 2 and len(said.stderr.splitlines()) == 1, said.stderr
    assert "run.lock" in said.stderr and "Traceback" not in said.stderr
    assert target.read_text() == "keep me"


def test_a_stopped_launch_lets_its_folder_go(tmp_path):
    """Launch.stop() (a notebook's Stop) ended the ranks but kept run.lock held for the life
    of the process: the folder read "running" and refused the next run."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.launch import Launch
    from explorer.pipeline.runtime.spec import RunSpec
    from explorer.pipeline.traces.folder import launcher_running

    folder = tmp_path / "stopped"
    spec = RunSpec.for_schedule(build("1f1b", 2, 2))
    first = Launch(spec, folder).start()
    assert launcher_running(folder, first.spec.run_id) is not None
    first.stop()
    assert launcher_running(folder, first.spec.run_id) is None
    second = Launch(spec, folder).start()  # refused while the first held the folder
    second.stop()


def test_with_the_launcher_gone_a_stopped_rank_is_named_by_every_command(tmp_path):
    """Stop rank 1 (SIGSTOP), then kill the launcher: rank 0 ends with it, rank 1 stands
    stopped and can end no way. read blamed rank 0's wait (or its missing end) where doctor
    named rank 1 stopped; now the process's state (T) names rank 1 in all four, as the
    launcher would have."""
    out = tmp_path / "frozen"
    job, pids = _moving_job(out)
    try:
        os.kill(pids[1], signal.SIGSTOP)
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
        _wait_ended([pids[0]], 120)
        said = asked_four_ways(out)
        doctor = json.loads(call_cli(["doctor", str(out), "--json"]).stdout)
    finally:
        _kill_all(job, pids)
    doc = json.loads(said["json"].stdout)
    assert (doc["failure"]["kind"], doc["failure"]["rank"]) == ("killed", 1), doc["failure"]
    assert doc["failure"]["signal"] == "SIGSTOP"
    assert said["read"].stdout.startswith("failed: rank 1 was stopped by a signal")
    assert said["collect"].stdout == said["read"].stdout
    assert "rank 1, stage 1" in said["check"].stdout, said["check"].stdout
    # rank 0 ended with its launcher (it waits on no one): doctor names rank 1 stopped
    assert "stage 1 (rank 1) stands stopped by a signal" in doctor["description"], doctor


def test_a_rank_reads_only_its_own_runs_spec(cli_1f1b_run, monkeypatch):
    """A rank still importing torch when another run took its folder read that run's spec and
    wrote that run's lines: the launcher now names the run in each rank's environment."""
    from explorer.errors import InputError
    from explorer.pipeline.runtime.spec import RUN_ID_VARIABLE, RunSpec

    folder = Path(cli_1f1b_run.folder)
    own = json.loads((folder / "spec.json").read_text())["run_id"]
    monkeypatch.setenv(RUN_ID_VARIABLE, own)
    assert RunSpec.read(folder).run_id == own
    monkeypatch.setenv(RUN_ID_VARIABLE, "20260101-000000-0123abcd")
    with pytest.raises(InputError, match="another run took the folder"):
        RunSpec.read(folder)


class _GroupWithAPeerGone:
    """A process group whose barrier meets gloo's words for a neighbour gone."""

    def __init__(self) -> None:
        import torch

        self.bound_device_id = torch.device("cpu")  # else, beside a GPU, barrier asks it for one

    def barrier(self, opts: object) -> None:
        raise RuntimeError(
            "[gloo/tcp/pair.cc:538] Read error 127.0.0.1:4629: Connection reset by peer"
        )


def _lost_in_barrier() -> RuntimeError:
    """gloo's error raised out of torch's own ``dist.barrier`` frames, as a rank whose neighbour
    died while it waited in the barrier that starts an iteration records it.

    The barrier is handed its group, and called beneath torch's exception logger (which looks
    the group up in the world's map once a default group exists): the answer never rests on
    whether a test before this one, in the same worker process, made a default group. Calling
    ``dist.barrier()`` bare did, and the suite failed once when one had (the barrier returned)."""
    import torch.distributed as dist

    barrier = getattr(dist.barrier, "__wrapped__", dist.barrier)
    try:
        barrier(group=_GroupWithAPeerGone())
    except RuntimeError as raised:
        return raised
    raise AssertionError("dist.barrier() on a group whose peer is gone did not raise")


def test_a_peer_lost_outside_an_instruction_is_a_consequence_not_the_cause(cli_1f1b_run, tmp_path):
    """Rank 1 killed (no word, no exit codes kept) while rank 0 waited in the barrier that starts
    an iteration (or the gather after the last): rank 0 wrote gloo's "Connection reset by peer"
    as its own ``error``, so read blamed rank 0 and doctor found no wait. Outside an instruction a
    lost peer is a lost peer too: read, check and doctor name rank 1, the rank that went."""
    from explorer.pipeline.runtime.recorder import Recorder
    from explorer.pipeline.runtime.worker import collective_of, outside_instructions

    folder = tmp_path / "gathered"
    run_id = _mid_run_copy(Path(cli_1f1b_run.folder), folder, keep=10**6)
    for rank in (0, 1):  # neither wrote its end: rank 1 was killed, rank 0 lost it
        path = folder / f"rank{rank}.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(x for x in lines if json.loads(x)["type"] != "done"))
    lost = _lost_in_barrier()
    assert collective_of(lost) == "barrier"
    recorder = Recorder(folder, 0, run_id)
    recorder.failure(outside_instructions(lost), text=None, collective=collective_of(lost))
    recorder.close()
    said = asked_four_ways(folder)
    doc = json.loads(said["json"].stdout)
    assert (doc["failure"]["rank"], doc["failure"]["stage"]) == (1, 1), doc["failure"]
    assert said["read"].stdout.startswith("failed: rank 1 ended without a report"), said["read"]
    assert doc["failure"]["consequences"][0].startswith("rank 0: "), doc["failure"]
    assert said["collect"].stdout == said["read"].stdout
    assert "rank 1, stage 1" in said["check"].stdout, said["check"].stdout
    doctor = json.loads(call_cli(["doctor", str(folder), "--json"]).stdout)
    assert doctor["culprit"] == 1 and doctor["waiting"] == [0], doctor["description"]
    assert "stage 0 (rank 0) waited in dist.barrier" in doctor["ranks"][0]["description"], doctor
    assert outside_instructions(ValueError("a model that raises")).kind == "error"
    assert collective_of(ValueError("raised here")) is None
