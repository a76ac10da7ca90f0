"""The stacks a job left, read back: the text forms, the folder's ranks, and the verdict from them.

The tracebacks and faulthandler dumps here are written by Python itself in this process (a real
exception, a real ``faulthandler.dump_traceback``); torch's ``[rankN]:`` prefixes are put before
their lines as torch's launcher does. The slow tests read real py-spy dumps and torchrun logs of
a real hung job (tests/pipeline/test_doctor_pipelining.py).
"""

from __future__ import annotations

import faulthandler
import json
import os
import threading
import traceback
from pathlib import Path

import pytest

from explorer.errors import InputError
from explorer.pipeline.runtime.doctor import doctor
from explorer.pipeline.traces.detect import STACKS
from explorer.pipeline.traces.stack_folder import (
    SAVED_MARK,
    clear_saved,
    is_stack_folder,
    read_stack_folder,
    save_stack,
)
from explorer.processes.stack_text import read_text_stack, split_by_rank
from tests.cli_in_process import call_cli

#: ``dist.recv`` as its frame reads in a traceback: a function of torch's c10d file that raises
#: gloo's timeout (a stand-in made here: the slow tests read torch's own).
C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
_c10d: dict = {}
exec(
    compile(
        "def recv(tensor, src=None):\n"
        "    raise RuntimeError('[gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
        "8000ms for recv operation to complete')\n",
        C10D,
        "exec",
    ),
    _c10d,
)
recv = _c10d["recv"]


def _a_timeout_traceback() -> str:
    try:
        recv(None, src=0)  # the line names the peer as a literal, as user code often does
    except RuntimeError:
        return traceback.format_exc()
    raise AssertionError("unreachable")


def _prefixed(text: str, rank: int, local: bool = False) -> str:
    """Lines as torch writes them: ``[rank1]: ...`` (``[default1]:`` first through torchrun --tee)."""
    head = (f"[default{rank}]:" if local else "") + f"[rank{rank}]: "
    return "\n".join(head + line for line in text.splitlines())


def test_a_traceback_is_read_innermost_first_with_its_source_lines_and_the_exception():
    stack = read_text_stack(_a_timeout_traceback())
    assert stack is not None and stack.form == "traceback"
    frames = stack.thread["frames"]
    assert frames[0]["name"] == "recv" and frames[0]["filename"] == C10D
    assert frames[1]["name"] == "_a_timeout_traceback"
    assert frames[1]["source"].startswith("recv(None, src=0)")
    assert stack.ended.startswith("RuntimeError:") and "Timed out" in stack.ended
    assert stack.thread["active"] is False


def test_of_two_tracebacks_the_last_is_the_one_that_ended_the_rank():
    first = _a_timeout_traceback()
    try:
        raise ValueError("later")
    except ValueError:
        second = traceback.format_exc()
    stack = read_text_stack(first + "\nsome log line\n" + second)
    assert stack is not None and stack.ended == "ValueError: later"


def test_faulthandler_dump_gives_the_main_thread_not_the_helper(tmp_path):
    stop = threading.Event()
    helper = threading.Thread(target=stop.wait, daemon=True)
    helper.start()
    try:
        with open(tmp_path / "dump.txt", "w") as f:
            faulthandler.dump_traceback(file=f, all_threads=True)
    finally:
        stop.set()
    stack = read_text_stack((tmp_path / "dump.txt").read_text())
    assert stack is not None and stack.form == "faulthandler"
    names = [f["name"] for f in stack.thread["frames"]]
    assert names[0] == "test_faulthandler_dump_gives_the_main_thread_not_the_helper"
    assert "wait" not in names[0]


def test_a_console_log_is_split_by_the_rank_prefixes_and_launcher_lines_are_nobodys():
    log = "\n".join(
        [
            "W1127 torch/distributed/run.py:803] Setting OMP_NUM_THREADS",
            "[default0]:[Gloo] Rank 0 is connected to 1 peer ranks.",
            _prefixed(_a_timeout_traceback(), 1, local=True),
            "Traceback (most recent call last):",  # torchrun's own, unprefixed
            '  File "/venv/bin/torchrun", line 6, in <module>',
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        ]
    )
    own = split_by_rank(log)
    assert set(own) == {0, 1}
    assert read_text_stack(own[0]) is None
    stack = read_text_stack(own[1])
    assert stack is not None and "Timed out" in stack.ended
    assert "torchrun" not in json.dumps(stack.thread)


def test_a_folder_of_logs_reads_each_ranks_stack_and_names_the_rank_that_left_none(tmp_path):
    for rank, text in ((0, ""), (1, _prefixed(_a_timeout_traceback(), 1))):
        where = tmp_path / "run_x" / "attempt_0" / str(rank)
        where.mkdir(parents=True)
        (where / "stderr.log").write_text(text)
        (where / "stdout.log").write_text("")
    assert is_stack_folder(tmp_path) and STACKS.recognise(tmp_path) is not None
    folder = read_stack_folder(tmp_path)
    assert set(folder.stacks) == {1} and folder.without_stack == (0,) and folder.ranks == [0, 1]
    verdict = doctor([], tmp_path).verdict
    assert (verdict.verdict, verdict.culprit, verdict.waiting) == ("waits-on", 0, (1,))
    waiter = verdict.state(1)
    assert (waiter.activity, waiter.op, waiter.peer, waiter.source) == (
        "waiting",
        "recv",
        0,
        "traceback",
    )
    assert waiter.describe().startswith("rank 1 waited in dist.recv from rank 0 [stderr.log: ")


def test_a_rank_that_raised_outside_any_wait_is_gone_where_it_raised(tmp_path):
    try:
        {}["missing"]  # the line that raises
    except KeyError:
        text = traceback.format_exc()
    (tmp_path / "rank0.log").write_text(text)
    (tmp_path / "rank1.log").write_text(_a_timeout_traceback())
    state = doctor([], tmp_path).verdict.state(0)
    assert state.activity == "gone" and "KeyError" in state.note
    line = _line_of("# the line that raises")
    assert state.where.endswith(f"test_stack_folder.py:{line}")


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.endswith(text) and "{}" in line)


def test_a_saved_stack_keeps_its_source_lines_so_it_reads_the_same_without_the_files(tmp_path):
    frame = {
        "name": "sleepy",
        "filename": "/gone/train.py",
        "line": 9,
        "locals": [],
        "source": "time.sleep(3600)",
        "context": ["x = 1"],
    }
    save_stack(tmp_path, 0, 123, "S", {"active": False, "frames": [frame]})
    state = doctor([], tmp_path).verdict.state(0)
    assert (state.activity, state.where, state.source) == ("sleeping", "/gone/train.py:9", "saved")


def test_bad_folders_get_one_line_and_exit_2(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here\n")
    # a crash log that names no rank (no rank<R> in its name, no [rankN] on its lines) is not a
    # job's stacks: detection and reading agree
    (tmp_path / "train.log").write_text(_a_timeout_traceback())
    assert not is_stack_folder(tmp_path)
    with pytest.raises(InputError, match="holds no stack a rank left"):
        read_stack_folder(tmp_path)
    called = call_cli(["doctor", str(tmp_path)])
    assert called.returncode == 2 and "Traceback" not in called.stderr
    assert len(called.stderr.strip().splitlines()) == 1, called.stderr
    called = call_cli(["doctor", str(tmp_path), "--save", str(tmp_path / "out")])
    assert called.returncode == 2 and "give the job's PIDs" in called.stderr


def test_a_broken_file_beside_good_ones_is_named_and_the_rest_is_read(tmp_path):
    (tmp_path / "rank1.log").write_text(_a_timeout_traceback())
    (tmp_path / "rank0.json").write_text('[{"frames": [ {"name": ')  # cut short
    diagnosis = doctor([], tmp_path)
    assert "rank0.json" in diagnosis.refused and diagnosis.verdict.culprit == 0
    called = call_cli(["read", str(tmp_path), "--json"])
    assert called.returncode == 1 and json.loads(called.stdout)["refused"].startswith(
        "could not read"
    )


def test_every_rank_of_a_large_job_is_read_and_the_waits_follow_to_the_one_that_left_nothing(
    tmp_path,
):
    text = _a_timeout_traceback()  # every rank waited on rank 0, which left nothing
    for rank in range(1, 256):
        (tmp_path / f"rank{rank}.log").write_text(text)
    verdict = doctor([], tmp_path).verdict
    assert (verdict.culprit, verdict.waiting) == (0, tuple(range(1, 256)))
    assert verdict.unseen == (0,)


def test_a_save_replaces_an_earlier_one_and_never_writes_into_a_folder_of_other_files(tmp_path):
    frame = {"name": "f", "filename": "/x.py", "line": 1, "locals": [], "source": "time.sleep(9)"}
    saved = tmp_path / "saved"
    for rank in range(4):  # an earlier job's save: four ranks
        save_stack(saved, rank, 100 + rank, "S", {"frames": [frame]})
    clear_saved(saved)  # the next save starts from nothing: no rank of the other job is left
    save_stack(saved, 0, 7, "S", {"frames": [frame]})
    assert sorted(p.name for p in saved.iterdir()) == [SAVED_MARK, "rank0.stack.json"]
    assert read_stack_folder(saved).ranks == [0]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(InputError, match="holds other files"):
        clear_saved(mine)
    assert (mine / "notes.txt").read_text() == "keep me"
    called = call_cli(["doctor", str(os.getpid()), "--save", str(mine)])
    assert called.returncode == 2 and "holds other files" in called.stderr


def test_a_file_naming_a_huge_rank_is_read_without_filling_in_every_rank_below_it(tmp_path):
    (tmp_path / "rank1.log").write_text(_a_timeout_traceback())
    (tmp_path / "rank99999999999.log").write_text(_a_timeout_traceback())
    folder = read_stack_folder(tmp_path)
    assert folder.ranks == [1, 99999999999]
    verdict = doctor([], tmp_path).verdict
    assert [s.rank for s in verdict.ranks] == [1, 99999999999]
