"""Ranks forked from a warm template (:mod:`explorer.processes.template`) end, report and die as
ranks started afresh do, and look the same from outside.

The worker is a small module written here, shaped as the explorer's workers are (imports at the
top, its work under ``__main__``); it imports a stand-in for torch (``warm_heavy``) that records
which process imported it, so each test can tell a forked rank from a fresh one.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from explorer.processes import Child, Engine, Supervisor, rank_env, supervise
from explorer.processes.orphan import LAUNCHER_PID
from explorer.processes.stacks import read_proc
from explorer.processes.warm import PAD_VARIABLE, warm_plan

HEAVY = "import os, sys\nPID = os.getpid()\nsys.stdout.write('imported once\\n')\n"
WORKER = """
import json, os, subprocess, sys, time
from pathlib import Path
from explorer.processes.orphan import end_with_launcher
NAMED = os.environ.get("EXPLORER_LAUNCHER_PID")
end_with_launcher()
import warm_heavy


def main():
    folder = Path(sys.argv[1])
    rank = int(os.environ["RANK"])
    what = json.loads((folder / "plan.json").read_text())[str(rank)]
    seen = {
        "pid": os.getpid(), "ppid": os.getppid(), "imported_in": warm_heavy.PID,
        "pgid": os.getpgid(0), "sid": os.getsid(0), "argv": sys.argv[1:], "cwd": os.getcwd(),
        "name": __name__, "named": NAMED, "launcher": os.environ.get("EXPLORER_LAUNCHER_PID"),
        "pad": os.environ.get("EXPLORER_RANK_ENV_PAD"),
    }
    (folder / f"seen{rank}.tmp").write_text(json.dumps(seen))
    os.replace(folder / f"seen{rank}.tmp", folder / f"seen{rank}.json")
    if what == "sleep":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        (folder / "grandchild").write_text(str(child.pid))
        time.sleep(600)
    if what in ("exit3", "raise"):  # both fail once told: each within the other's grace
        while not (folder / "go").exists():
            time.sleep(0.02)
    if what == "exit3":
        sys.exit(3)
    if what == "raise":
        raise ValueError("rank raised on purpose")
    print("rank", rank, "done", flush=True)


if __name__ == "__main__":
    main()
"""


class Workers(Engine):
    """``python -m warm_worker FOLDER`` per rank, as the pipeline's engines start theirs."""

    def __init__(self, folder: Path, world: int, warm: bool = True, launcher: bool = True) -> None:
        self.folder, self.world, self.warm, self.launcher = folder, world, warm, launcher

    def children(self) -> list[Child]:
        return [
            Child(
                rank,
                [sys.executable, "-m", "warm_worker", str(self.folder)],
                {  # buffered output, as a rank's is unless PYTHONUNBUFFERED says otherwise
                    **{
                        k: v
                        for k, v in rank_env(rank, self.world, 29999, threads=1).items()
                        if k != "PYTHONUNBUFFERED"
                    },
                    "PYTHONPATH": f"{self.folder / 'modules'}{os.pathsep}{rank_env(0, 1, 0)['PYTHONPATH']}",
                    **({LAUNCHER_PID: str(os.getpid())} if self.launcher else {}),
                },
                self.folder / f"rank{rank}.log",
                warm=self.warm,
            )
            for rank in range(self.world)
        ]


def _folder(tmp_path: Path, plan: dict[int, str], worker: str = WORKER) -> Path:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "warm_worker.py").write_text(worker)
    (modules / "warm_heavy.py").write_text(HEAVY)
    (tmp_path / "plan.json").write_text(json.dumps({str(r): w for r, w in plan.items()}))
    return tmp_path


def _seen(folder: Path, rank: int) -> dict:
    return json.loads((folder / f"seen{rank}.json").read_text())


def _wait_for(path: Path, timeout_s: float = 60.0) -> None:
    end = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < end, f"{path} never written"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    proc = read_proc(pid)
    return proc is not None and proc.alive


def _dies(pid: int, within_s: float = 30.0) -> bool:
    """Whether ``pid`` is dead within ``within_s`` (a killed process still runs until the
    kernel schedules it, later on a busy machine)."""
    end = time.monotonic() + within_s
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.02)
    return not _alive(pid)


@pytest.mark.slow
def test_forked_ranks_end_report_and_die_as_fresh_ones_and_look_the_same(tmp_path):
    folder = _folder(tmp_path, {0: "ok", 1: "sleep", 2: "exit3", 3: "raise"})
    sup = Supervisor(Workers(folder, 4), timeout_s=120).start()
    try:
        assert sup.template is not None, "four ranks of one command line are forked"
        _wait_for(folder / "grandchild")
        _wait_for(folder / "seen1.json")
        sleeper = _seen(folder, 1)
        # What `explorer doctor` reads of a live rank: its own RANK in /proc/PID/environ, and
        # the run folder as the last word of its command line.
        proc = read_proc(sleeper["pid"])
        assert proc is not None and (proc.rank, proc.world_size) == (1, 4)
        assert proc.cmdline[-1] == str(folder) and proc.is_python
        template = read_proc(sup.template.proc.pid)
        assert template is not None and template.rank is None, "the template is no rank"
    finally:
        (folder / "go").write_text("")
    out = sup.wait()
    assert out.returncodes == {0: 0, 1: -9, 2: 3, 3: 1}
    assert out.stopped == {1} and out.ending == "failed"
    template_pid = sup.template.proc.pid
    for rank in range(4):
        seen = _seen(folder, rank)
        assert seen["imported_in"] == template_pid != seen["pid"], (
            "imports done once, before the fork"
        )
        assert seen["ppid"] == template_pid
        assert seen["pgid"] == seen["sid"] == seen["pid"], "each leads its own session and group"
        assert seen["argv"] == [str(folder)] and seen["name"] == "__main__"
        assert seen["named"] == str(template_pid), "it ends with the template"
        assert seen["launcher"] is None and seen["pad"] is None
        assert out.exits[rank].pid == seen["pid"]
    assert "rank 0 done" in (folder / "rank0.log").read_text()
    logs = "".join((folder / f"rank{r}.log").read_text() for r in range(4))
    assert logs.count("imported once") == 1, "what the imports printed is written once"
    assert "ValueError: rank raised on purpose" in (folder / "rank3.log").read_text()
    assert "rank raised" not in (folder / "rank0.log").read_text()
    assert _dies(int((folder / "grandchild").read_text())), "the killed rank's group died"
    assert not _alive(template_pid), "reaped before the watch returned"


@pytest.mark.slow
def test_a_run_stopped_as_it_starts_kills_ranks_just_forked(tmp_path):
    """Stopped while the template still imported: it forked the ranks, then was told to reap,
    and its kill of their groups missed ranks that did not lead one yet; it then waited on
    them, and the supervisor on it, 30 s."""
    folder = _folder(tmp_path, {0: "sleep", 1: "sleep", 2: "sleep"})
    sup = Supervisor(Workers(folder, 3), timeout_s=120).start()
    sup.stop()
    ended, stopped = sup.ended_so_far()
    assert ended == {0: -9, 1: -9, 2: -9} and stopped == {0, 1, 2}
    assert sup.template is not None and not _alive(sup.template.proc.pid)


@pytest.mark.slow
def test_a_worker_that_cannot_be_imported_fails_every_rank_with_the_traceback_once(tmp_path):
    folder = _folder(tmp_path, {0: "ok", 1: "ok"}, worker="raise ImportError('no such thing')\n")
    out = supervise(Workers(folder, 2), timeout_s=120)
    assert out.returncodes == {0: 1, 1: 1} and out.ending == "failed"
    assert "ImportError: no such thing" in (folder / "rank0.log").read_text()


@pytest.mark.slow
def test_the_same_ranks_started_afresh_end_the_same_way(tmp_path):
    folder = _folder(tmp_path, {0: "ok", 1: "exit3"})
    (folder / "go").write_text("")  # rank 1 fails at once
    sup = Supervisor(Workers(folder, 2, warm=False), timeout_s=120).start()
    out = sup.wait()
    assert sup.template is None
    assert out.returncodes == {0: 0, 1: 3}
    assert all(_seen(folder, r)["imported_in"] == _seen(folder, r)["pid"] for r in range(2))


@pytest.mark.slow
def test_ranks_whose_launcher_named_no_rule_to_end_with_it_are_given_none(tmp_path):
    """A worker that does not read the variable (the compile probe's ranks) kept it, and
    handed it to whatever the user's step started."""
    folder = _folder(tmp_path, {0: "ok", 1: "ok"})
    sup = Supervisor(Workers(folder, 2, launcher=False), timeout_s=120).start()
    assert sup.wait().returncodes == {0: 0, 1: 0} and sup.template is not None
    assert all(_seen(folder, r)["named"] is None for r in range(2))


def _child(rank: int, **env: str) -> Child:
    return Child(
        rank,
        [sys.executable, "-m", "w", "F"],
        {"PATH": "/bin", "RANK": str(rank), "LOCAL_RANK": str(rank), **env},
        Path(f"rank{rank}.log"),
        warm=True,
    )


def test_only_ranks_that_differ_in_their_rank_alone_are_forked():
    plan = warm_plan([_child(0), _child(1), _child(10)])
    assert plan is not None
    assert list(plan.env) == ["PATH", PAD_VARIABLE], "the padding ends the environment"
    assert plan.own[10] == {"RANK": "10", "LOCAL_RANK": "10"}
    assert len(plan.env[PAD_VARIABLE]) >= len("RANK=10\0LOCAL_RANK=10\0")
    assert warm_plan([_child(0)]) is None, "one process gains nothing"
    assert warm_plan([_child(0), _child(1, OMP_NUM_THREADS="2")]) is None
    assert warm_plan([_child(0), Child(1, ["python", "-c", "x"], {}, Path("l"), warm=True)]) is None
    cold = Child(1, _child(1).argv, _child(1).env, Path("l"))
    assert warm_plan([_child(0), cold]) is None, "only where the engine asked"
    piped = Child(1, _child(1).argv, _child(1).env, Path("l"), pipe_stdout=True, warm=True)
    assert warm_plan([_child(0), piped]) is None
