"""The doctor's pure parts: frames read into what a rank does, placed in the schedule, and the verdict.

Frames here are small hand-made stacks in py-spy's shapes (the live tests read real ones).
"""

from __future__ import annotations

import os
import time

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.hang import RankState, diagnose, locate, placed
from explorer.pipeline.analysis.stacks import (
    Frame,
    StackReading,
    frames_from_pyspy,
    main_thread,
    read_stack,
)
from explorer.pipeline.schedules.instructions import Kind

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
P2P = "/src/explorer/pipeline/runtime/p2p.py"
EXECUTOR = "/src/explorer/pipeline/runtime/executor.py"
DS_ENGINE = "/venv/lib/python3.11/site-packages/deepspeed/runtime/pipe/engine.py"
DS_P2P = "/venv/lib/python3.11/site-packages/deepspeed/runtime/pipe/p2p.py"


def explorer_stack(op: str, peer_rank: int, peer_stage: int, kind: Kind, step: int) -> list[Frame]:
    """The explorer's engine waiting in ``dist.<op>`` (innermost first), as py-spy reads it."""
    end = "dst" if op == "send" else "src"
    return [
        Frame(op, C10D, 2496, {"tensor": "<Tensor at 0x1>", end: str(peer_rank), "tag": "0"}),
        Frame(
            "_exception_logger.<locals>.wrapper",
            "/venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py",
            81,
        ),
        Frame(f"Channels.{op}", P2P, 76, {"peer": str(peer_stage), "ins": "<Instruction at 0x2>"}),
        Frame("RankExecutor.execute", EXECUTOR, 141, {"kind": str(int(kind)), "iteration": "0"}),
        Frame("RankExecutor.run", EXECUTOR, 92, {"step": str(step), "iteration": "0"}),
    ]


def state(rank, activity, op="", peer=None, **kw) -> RankState:
    return RankState(rank=rank, pid=100 + rank, activity=activity, op=op, peer=peer, **kw)


# -- reading a stack ------------------------------------------------------------------------


def test_the_explorers_engine_waiting_in_a_send_names_peer_step_and_kind():
    r = read_stack(explorer_stack("send", 1, 1, Kind.SEND_ACTIVATION, 5), active=False)
    assert (r.activity, r.op, r.peer_rank, r.tag) == ("waiting", "send", 1, 0)
    assert (r.engine, r.step, r.kind, r.peer_stage) == ("explorer", 5, Kind.SEND_ACTIVATION, 1)
    assert r.where == f"{P2P}:76"  # the innermost frame outside the libraries


def test_deepspeeds_engine_names_kind_and_buffer_from_its_exec_method():
    frames = [
        Frame("recv", C10D, 2600, {"src": "2", "tag": "0"}),
        Frame("recv", DS_P2P, 80, {"src_stage": "2", "async_op": "False", "dest_stage": "1"}),
        Frame("PipelineEngine._exec_recv_grads", DS_ENGINE, 1180, {"buffer_id": "1"}),
        Frame("PipelineEngine._exec_schedule", DS_ENGINE, 1387, {"cmd": "<RecvGrad at 0x3>"}),
    ]
    r = read_stack(frames, active=False)
    assert (r.activity, r.op, r.peer_rank) == ("waiting", "recv", 2)
    assert (r.engine, r.kind, r.buffer, r.peer_stage, r.step) == (
        "deepspeed",
        Kind.RECV_GRAD,
        1,
        2,
        None,
    )


def test_a_sleep_in_user_code_is_told_from_a_wait_by_its_source_line():
    frames = [Frame("slow_step", "/home/me/train.py", 42, {}, "time.sleep(600)")]
    r = read_stack(frames, active=False)
    assert (r.activity, r.op, r.where) == ("sleeping", "", "/home/me/train.py:42")
    assert read_stack(frames, active=True).activity == "computing"
    blocked = [Frame("load", "/home/me/train.py", 7, {}, "batch = queue.get()")]
    assert read_stack(blocked, active=False).activity == "idle"


TORCH = "/venv/lib/python3.11/site-packages/torch"


def test_a_rank_inside_torch_compile_is_compiling_and_running_compiled_code_is_not():
    """Dynamo converting a frame, or Inductor compiling AOTAutograd's backward at the first
    backward, is compiling; the ``eval_frame`` wrapper of code already compiled is not."""
    call = Frame("train_step", "/home/me/train.py", 30, {}, "loss = model(x).sum()")
    wrapper = Frame("_fn", f"{TORCH}/_dynamo/eval_frame.py", 655, {})
    first = [
        Frame("compile_fx", f"{TORCH}/_inductor/compile_fx.py", 1200, {}),
        Frame("_compile", f"{TORCH}/_dynamo/convert_frame.py", 900, {}),
        wrapper,
        call,
    ]
    r = read_stack(first, active=True)
    assert (r.activity, r.where) == ("compiling", "/home/me/train.py:30")
    backward = [Frame("compile_fx", f"{TORCH}/_inductor/compile_fx.py", 1200, {}), call]
    assert read_stack(backward, active=True).activity == "compiling"
    assert read_stack([wrapper, call], active=True).activity == "computing"
    said = RankState(1, 11, "compiling", where="train.py:30").describe()
    assert said == "rank 1 is still compiling (torch.compile) at train.py:30"


def test_a_rank_in_no_instruction_is_named_by_the_stage_it_holds():
    """A rank stopped in the barrier between iterations is in no instruction: the doctor named
    it "rank 1" there and "stage 1 (rank 1)" a moment later (a fresh clone failed on the race).
    Its one stage names it either way; a rank of two stages (interleaved) keeps its rank."""
    from explorer.pipeline.runtime.doctor import _staged

    gpipe, interleaved = build("gpipe", 2, 4), build("interleaved-1f1b", 2, 4, chunks=2)
    stopped = RankState(1, 11, "stopped", where="worker.py:136")
    assert _staged(stopped, gpipe).describe().startswith("stage 1 (rank 1) stands stopped ")
    assert _staged(stopped, interleaved).describe().startswith("rank 1 stands stopped ")
    assert _staged(stopped, None).describe().startswith("rank 1 stands stopped ")
    placed_at = _staged(state(1, "waiting", op="recv", peer=0), gpipe)
    assert placed_at.stage == 1 and placed_at.describe().startswith("stage 1 (rank 1) waits")


def test_a_planted_fault_is_named_with_its_step_and_a_collective_has_no_peer():
    frames = [
        Frame("RankExecutor._inject", EXECUTOR, 160, {"step": "5"}, "time.sleep(3600)"),
        Frame("RankExecutor.run", EXECUTOR, 88, {"step": "5", "iteration": "0"}),
    ]
    r = read_stack(frames, active=False)
    assert (r.activity, r.fault, r.step, r.kind) == ("sleeping", True, 5, None)
    c = read_stack([Frame("all_reduce", C10D, 2800, {"op": "<ReduceOp at 0x1>"})], active=False)
    assert (c.activity, c.op, c.peer_rank) == ("waiting", "all_reduce", None)


def test_pyspy_json_becomes_frames_and_the_main_thread_is_chosen():
    dump = [
        {"os_thread_id": 7, "thread_name": "pin_memory", "frames": []},
        {
            "os_thread_id": 42,
            "active": False,
            "frames": [
                {
                    "name": "recv",
                    "filename": C10D,
                    "line": 9,
                    "locals": [{"name": "src", "repr": "3"}, {"name": "t", "repr": "<Tensor>"}],
                }
            ],
        },
    ]
    thread = main_thread(dump, 42)
    frames = frames_from_pyspy(thread, lambda f, n: f"{f}:{n}")
    above = tuple(f"{C10D}:{n}" for n in (6, 7, 8))  # what a loop's wait was made for
    assert frames == [Frame("recv", C10D, 9, {"src": "3", "t": "<Tensor>"}, f"{C10D}:9", above)]


# -- placing in the schedule ------------------------------------------------------------------


def test_a_reading_is_placed_at_its_steps_instruction_with_its_microbatch():
    schedule = build("1f1b", 2, 4).replace(params={**build("1f1b", 2, 4).params, "p2p": "blocking"})
    send = StackReading("waiting", "send", 1, step=1, kind=Kind.SEND_ACTIVATION, peer_stage=1)
    at, mb = placed(schedule, locate(schedule, 0, send))
    assert at is not None and (at.stage, at.step) == (0, 1)
    assert at.deepspeed_repr.startswith("SendActivation") and mb == 1
    # a step without a kind (a fault before the step ran): the step's first instruction
    first = locate(schedule, 0, StackReading("sleeping", step=1))
    assert first is not None and int(schedule.step[first]) == 1
    # DeepSpeed gives no step: the first instruction of that kind after the last finished step
    ds = StackReading("waiting", "recv", 1, kind=Kind.RECV_GRAD, engine="deepspeed")
    row = locate(schedule, 0, ds, after_step=3)
    assert row is not None and int(schedule.step[row]) > 3
    assert int(schedule.kind[row]) == Kind.RECV_GRAD
    assert locate(schedule, 0, StackReading("computing")) is None


# -- the verdict --------------------------------------------------------------------------------


def test_two_ranks_sending_to_each_other_are_a_cycle_with_the_analysis_record():
    schedule = build("1f1b", 2, 4)
    a = placed(
        schedule, locate(schedule, 0, StackReading("waiting", step=1, kind=Kind.SEND_ACTIVATION))
    )
    b = placed(schedule, locate(schedule, 1, StackReading("waiting", step=2, kind=Kind.SEND_GRAD)))
    v = diagnose(
        [
            state(1, "waiting", "send", 0, at=b[0], microbatch=b[1]),
            state(0, "waiting", "send", 1, at=a[0], microbatch=a[1]),
        ]
    )
    assert (v.verdict, v.cycle, v.culprit) == ("cycle", (0, 1), None)
    text = v.describe()
    assert text.startswith(
        "wait-for cycle: stage 0 (rank 0) waits in SendActivation of micro-batch"
    )
    assert "to stage 1 (rank 1)" in text and "stage 1 (rank 1) waits in SendGrad" in text
    assert v.deadlock is not None and [w.at.stage for w in v.deadlock.cycle] == [0, 1]
    assert v.to_dict()["kind"] == "hang" and v.to_dict()["verdict"] == "cycle"


def test_a_send_and_its_receive_are_a_rendezvous_not_a_cycle():
    v = diagnose([state(0, "waiting", "send", 1, tag=0), state(1, "waiting", "recv", 0, tag=0)])
    assert v.verdict == "no-wait"
    # the same pair with different tags cannot meet: a cycle
    w = diagnose([state(0, "waiting", "send", 1, tag=0), state(1, "waiting", "recv", 0, tag=3)])
    assert (w.verdict, w.cycle) == ("cycle", (0, 1))


def test_the_rank_everyone_waits_on_is_named_through_chains_of_waits():
    v = diagnose(
        [
            state(0, "waiting", "send", 1),
            state(1, "sleeping", where="/home/me/train.py:42"),
            state(2, "waiting", "send", 1),
            state(3, "waiting", "recv", 2),  # waits on 2, which waits on 1
        ]
    )
    assert (v.verdict, v.culprit, v.waiting) == ("waits-on", 1, (0, 2, 3))
    assert v.quiet_s is None  # no rank wrote a progress file
    quiet = diagnose([state(0, "waiting", "send", 1, since_s=9.0), state(1, "gone", since_s=30.0)])
    assert quiet.quiet_s == 9.0 and quiet.to_dict()["quiet_s"] == 9.0
    assert v.describe() == ("ranks 0, 2, 3 wait on rank 1: rank 1 sleeps at /home/me/train.py:42")


def test_a_gone_rank_and_a_collective_missing_one_rank():
    gone = diagnose([state(0, "waiting", "recv", 1), state(1, "gone", source="log")])
    assert (gone.verdict, gone.culprit, gone.unseen) == ("waits-on", 1, (1,))
    assert "rank 1 is gone" in gone.describe()
    coll = diagnose(
        [
            state(0, "waiting", "all_reduce"),
            state(1, "computing", where="/home/me/train.py:9"),
            state(2, "waiting", "all_reduce"),
        ]
    )
    assert (coll.verdict, coll.culprit, coll.waiting) == ("waits-on", 1, (0, 2))
    idle = diagnose([state(0, "computing"), state(1, "computing")])
    assert idle.verdict == "no-wait"


def test_a_run_is_finished_only_when_every_rank_finished():
    done = diagnose([state(0, "finished", source="log"), state(1, "finished", source="log")])
    assert done.verdict == "finished" and "the run finished" in done.describe()
    assert "is gone" not in done.describe()
    half = diagnose([state(0, "finished", source="log"), state(1, "gone", source="log")])
    assert half.verdict == "no-wait" and "rank 1 is gone" in half.describe()
    waits = diagnose([state(0, "finished", source="log"), state(1, "waiting", "recv", 0)])
    assert waits.verdict == "waits-on" and waits.culprit == 0


# -- bad input ----------------------------------------------------------------------------------


def _free_pids(count: int = 1) -> list[int]:
    """PIDs no process has (from the top of the range, where the kernel hands them out last)."""
    pid, out = int(open("/proc/sys/kernel/pid_max").read()) - 1, []
    while len(out) < count:
        if not os.path.exists(f"/proc/{pid}"):
            out.append(pid)
        pid -= 1
    return out


def test_a_pid_that_is_not_running_or_not_a_job_is_one_line_and_exit_2(explorer_cli):
    out = explorer_cli("doctor", str(_free_pids()[0]))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "no process" in out.stderr
    out = explorer_cli("doctor", str(os.getpid()))  # this test: python, but no rank below it
    assert out.returncode == 2 and "no rank below it" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = explorer_cli("doctor", "abc")
    assert out.returncode == 2 and "positive integer" in out.stderr


# -- attaching refused: one line with the fix, and the job's own file instead -------------------


def test_a_refused_attach_is_one_line_with_the_fix_and_a_readable_dump_is_kept():
    from explorer.processes.stacks import PTRACE_FIX, parse_dump

    refused = parse_dump(7, 1, "", "Error: Permission Denied (os error 13)\n")
    assert refused.refused == PTRACE_FIX and "\n" not in PTRACE_FIX
    assert "ptrace_scope" in PTRACE_FIX and "SYS_PTRACE" in PTRACE_FIX
    other = parse_dump(7, 1, "", "Error: Failed to find python version from target process\n")
    assert other.refused.startswith("py-spy could not read it: Error: Failed to find python")
    ok = parse_dump(7, 0, '[{"os_thread_id": 7, "frames": []}]', "")
    assert ok.refused == "" and ok.threads == ({"os_thread_id": 7, "frames": []},)


def test_a_rank_without_a_stack_is_described_from_its_own_file(tmp_path):
    import json

    from explorer.pipeline.runtime.doctor import RankProcess, _read_log, _state, _thread
    from explorer.processes.stacks import PTRACE_FIX, Dump, Proc

    schedule = build("1f1b", 2, 4)
    lines = [
        {"type": "start", "rank": 1, "pid": 4242},
        {"type": "instr", "rank": 1, "step": 2},
        {"type": "instr", "rank": 1, "step": 3},
    ]
    (tmp_path / "rank1.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    log = _read_log(tmp_path, 1)
    assert (log["pid"], log["step"]) == (4242, 3)
    proc = Proc(4242, 1, "S", ("python",), {"RANK": "1"})
    dumps = {4242: Dump(4242, refused=PTRACE_FIX)}
    rank = RankProcess(1, 4242, proc)
    s = _state(rank, _thread(rank, dumps), log, schedule, {}, {4242: "S"})
    assert (s.activity, s.source) == ("unseen", "log")
    assert s.at is not None and s.at.step == 4  # the step after the last one it finished
    assert s.note.startswith(PTRACE_FIX) and s.note.endswith("its last finished step: 3")


def test_a_rank_is_stopped_where_its_stack_shows_only_if_it_was_stopped_before_the_read():
    """A rank that stopped while its stack was read stands elsewhere than that stack: seen in a
    fresh clone, where a rank still in ``init_process_group`` was said stopped at that line."""
    from explorer.pipeline.runtime.doctor import state_at_stack

    assert state_at_stack("T", "T") == "T"  # stopped throughout: it stands where it was read
    assert state_at_stack("S", "T") == "S"  # stopped after the read: not there
    assert state_at_stack("R", "T") == "R"
    assert state_at_stack("T", "S") == "S"  # continued meanwhile: as it is now
    assert state_at_stack("S", "R") == "R"
    assert state_at_stack(None, None) is None


def test_a_folder_without_rank_files_and_pids_all_gone_are_bad_input(explorer_cli, tmp_path):
    out = explorer_cli("doctor", str(tmp_path))
    assert out.returncode == 2 and "holds no rank<R>.jsonl" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = explorer_cli("doctor", *map(str, _free_pids(2)))
    assert out.returncode == 2 and "none of the PIDs" in out.stderr


@pytest.mark.parametrize("what", ["directory", "link to nothing"])
def test_a_rank_file_that_is_no_file_is_bad_input(explorer_cli, tmp_path, what):
    """A folder named rank0.jsonl was read as rank 0, "gone" (exit 1), where read, check and
    run --collect refused the folder."""
    odd = tmp_path / "rank0.jsonl"
    odd.mkdir() if what == "directory" else odd.symlink_to(tmp_path / "nowhere")
    out = explorer_cli("doctor", str(tmp_path))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith("explorer doctor: error: rank0.jsonl in "), out.stderr
    assert f" is a {what}, not a rank's file" in out.stderr, out.stderr


def test_each_rank_is_its_highest_process_not_a_child_that_inherited_rank():
    from explorer.pipeline.runtime.doctor import _outermost
    from explorer.processes.stacks import Proc

    def proc(pid, ppid, rank):
        return Proc(pid, ppid, "S", ("python",), {"RANK": str(rank)})

    # parents first, as the tree walk gives them: rank 0's DataLoader worker (pid 30) is below it
    found = _outermost([proc(10, 1, 0), proc(11, 1, 1), proc(30, 10, 0)])
    assert [p.pid for p in found] == [10, 11]


def test_pythons_own_helpers_are_never_ranks():
    """multiprocessing's resource tracker keeps the RANK of the kernel that started it (after
    DeepSpeed ran in that kernel): it is not a rank, nor is the fork server; a worker that
    multiprocessing spawned runs user code and may be one."""
    from explorer.processes.stacks import Proc

    def proc(*code: str) -> Proc:
        return Proc(40, 1, "S", ("/usr/bin/python3", *code), {"RANK": "0"})

    tracker = proc("-B", "-s", "-c", "from multiprocessing.resource_tracker import main;main(8)")
    server = proc("-c", "from multiprocessing.forkserver import main; main(9, 10, ['__main__'])")
    spawned = proc("-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=8)")
    assert tracker.is_python_helper and server.is_python_helper
    assert not spawned.is_python_helper and not proc("train.py").is_python_helper
    assert not Proc(
        41, 1, "S", ("sh", "-c", "from multiprocessing.forkserver import main"), {}
    ).is_python_helper
    assert not proc(
        "-c", "import train; from multiprocessing.forkserver import main"
    ).is_python_helper


@pytest.mark.slow
def test_a_kernel_whose_resource_tracker_kept_its_rank_has_no_rank_below_it(explorer_cli, tmp_path):
    """A process that ran DeepSpeed in-process (RANK=0 in its environment) and then used
    multiprocessing has the resource tracker below it, started with RANK=0: the doctor says
    there is no rank below it, rather than diagnosing the tracker as rank 0."""
    import subprocess
    import sys

    ready = tmp_path / "ready"
    code = (
        "import os, time, pathlib, sys\n"
        "os.environ['RANK'] = '0'; os.environ['MASTER_PORT'] = '29511'\n"
        "from multiprocessing import resource_tracker\n"
        "resource_tracker.ensure_running()\n"
        "pathlib.Path(sys.argv[1]).write_text('ok')\n"
        "time.sleep(120)\n"
    )
    # started without a job's variables, whatever this test's process holds (a pytest worker
    # that ran a process-group test keeps DeepSpeed's): the kernel sets its RANK itself
    job = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    clean = {k: v for k, v in os.environ.items() if k not in job}
    kernel = subprocess.Popen([sys.executable, "-c", code, str(ready)], env=clean)
    try:
        for _ in range(600):
            if ready.exists() or kernel.poll() is not None:
                break
            time.sleep(0.05)
        assert ready.exists()
        out = explorer_cli("doctor", str(kernel.pid))
        assert out.returncode == 2 and "no rank below it" in out.stderr, (out.stdout, out.stderr)
    finally:
        kernel.kill()
        kernel.wait()


def test_a_launcher_that_kept_a_rank_in_its_environment_is_not_taken_for_rank_0():
    """A kernel that ran DeepSpeed in-process keeps RANK=0 and a MASTER_PORT; its job's ranks have another."""
    from explorer.pipeline.runtime.doctor import _outermost
    from explorer.processes.stacks import Proc

    def proc(pid, ppid, rank, port):
        return Proc(pid, ppid, "S", ("python",), {"RANK": str(rank), "MASTER_PORT": port})

    launcher = proc(5, 1, 0, "29500")  # left over from an earlier in-process run
    ranks = [proc(10, 5, 0, "41000"), proc(11, 5, 1, "41000"), proc(30, 10, 0, "41000")]
    found = _outermost([launcher, *ranks])
    assert [p.pid for p in found] == [10, 11]
    # a rank given alone, with its DataLoader worker below it, is still the rank
    assert [p.pid for p in _outermost([ranks[0], ranks[2]])] == [10]


def test_a_launcher_above_a_process_with_no_rank_is_not_taken_for_rank_0_either():
    """The explorer's ranks are forked from a template with no RANK (torchrun has none either):
    the walk up from a rank stopped there, and the launcher's leftover RANK=0 made it rank 0."""
    from explorer.pipeline.runtime.doctor import _outermost
    from explorer.processes.stacks import Proc

    launcher = Proc(5, 1, "S", ("python",), {"RANK": "0"})  # the leftover RANK, no port
    template = Proc(7, 5, "S", ("python",), {"MASTER_PORT": "41000"})
    ranks = [
        Proc(10 + r, 7, "S", ("python",), {"RANK": str(r), "MASTER_PORT": "41000"}) for r in (0, 1)
    ]
    with_rank = [launcher, *ranks]
    assert [p.pid for p in _outermost(with_rank, [launcher, template, *ranks])] == [10, 11]


def test_ranks_waiting_in_different_collectives_are_a_mismatch_the_odd_one_named_first():
    ranks = [state(r, "waiting", "barrier", where="train.py:10") for r in (0, 2, 3)] + [
        state(1, "waiting", "all_reduce", where="train.py:9")
    ]
    v = diagnose(ranks)
    assert v.verdict == "collective-mismatch" and v.mismatch is not None
    assert v.describe() == (
        "rank 1 waits in all_reduce (train.py:9); ranks 0, 2, 3 wait in barrier (train.py:10): "
        "different collectives, so none of them can complete"
    )
    assert v.to_dict()["mismatch"]["how"] == "op"


def test_ranks_in_one_collective_waiting_on_a_sleeper_are_no_mismatch():
    ranks = [state(r, "waiting", "all_reduce", where="train.py:9") for r in (0, 2)] + [
        state(1, "sleeping", where="train.py:5")
    ]
    v = diagnose(ranks)
    assert (v.verdict, v.culprit, v.mismatch) == ("waits-on", 1, None)
