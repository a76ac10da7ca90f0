"""The supervisor with real child processes: every ending is named, and only its own processes die.

Each child is a few lines of Python started with ``python -c``; reports come back through a
JSON-lines file per rank (as the pipeline's ranks write them) or marked stdout lines (as the
XLA child writes them), read by a small engine defined here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

import pytest

from explorer.processes import Child, Engine, Report, Supervisor, supervise

REPORT = """
import json, os, sys
def report(kind, **data):
    with open(os.environ['REPORT_FILE'], 'a') as fh:
        fh.write(json.dumps({'kind': kind, **data}) + '\\n')
"""


class Scripted(Engine):
    """One ``python -c`` child per script; each appends JSON lines to its own report file."""

    def __init__(self, folder: Path, scripts: Sequence[str], grace_s: float = 0.5) -> None:
        self.folder, self.scripts, self.grace = folder, scripts, grace_s
        self.offsets: dict[int, int] = {}

    def children(self) -> list[Child]:
        return [
            Child(
                rank,
                [sys.executable, "-c", REPORT + textwrap.dedent(script)],
                {**os.environ, "REPORT_FILE": str(self._file(rank))},
                self.folder / f"rank{rank}.log",
            )
            for rank, script in enumerate(self.scripts)
        ]

    def _file(self, rank: int) -> Path:
        return self.folder / f"rank{rank}.jsonl"

    def read(self) -> list[Report]:
        out = []
        for rank in range(len(self.scripts)):
            path = self._file(rank)
            if not path.exists():
                continue
            data = path.read_bytes()
            end = data.rfind(b"\n") + 1
            start, self.offsets[rank] = self.offsets.get(rank, 0), end
            for line in data[start:end].decode().splitlines():
                doc = json.loads(line)
                out.append(Report(rank, doc.pop("kind"), doc))
        return out

    def grace_s(self) -> float:
        return self.grace


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill(0): read its state
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(path: Path, timeout_s: float = 10.0) -> str:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path} never written")


@pytest.mark.slow
def test_each_ending_is_its_exit_status_and_its_report(tmp_path):
    scripts = [
        "report('done'); sys.exit(0)",
        "report('begin', step=3)\nraise ValueError('diverged at step 3')",
        "report('begin', step=1); os._exit(3)",
        "import signal; report('begin', step=0); os.kill(os.getpid(), signal.SIGSEGV)",
    ]
    seen: list[Report] = []
    # a grace no rank needs in full (none hangs): a busy machine's start-up is not a verdict
    out = supervise(Scripted(tmp_path, scripts, grace_s=60.0), on_report=seen.extend)
    codes = out.returncodes
    assert codes[0] == 0 and codes[1] == 1 and codes[2] == 3 and codes[3] == -signal.SIGSEGV
    assert out.ending == "failed" and not out.ok and out.stopped == frozenset()
    assert [r.kind for r in out.reports[0]] == ["done"]
    assert out.reports[1][0].data == {"step": 3}
    assert "ValueError: diverged at step 3" in (tmp_path / "rank1.log").read_text()
    # the callback saw every report, as typed records
    assert sorted((r.rank, r.kind) for r in seen) == [
        (0, "done"),
        (1, "begin"),
        (2, "begin"),
        (3, "begin"),
    ]


@pytest.mark.slow
def test_all_clean_is_finished(tmp_path):
    out = supervise(Scripted(tmp_path, ["report('done')"] * 2))
    assert out.ok and out.ending == "finished" and out.returncodes == {0: 0, 1: 0}


@pytest.mark.slow
def test_a_stalled_process_is_killed_after_the_grace_and_the_others_may_report(tmp_path):
    """No report for ``stall_s``: the grace lets a slower rank still say its part, then both die.

    Rank 1 speaks 0.9 s after its first report: after the 0.6 s stall, 2.1 s inside the grace,
    a margin no busy machine's wake-up delay reaches. Lower bounds follow from the sleeps; the
    upper bound is only a hang back-stop (the verdict is the ending and the kills).
    """
    scripts = [
        "import time\nreport('begin', step=0)\ntime.sleep(3600)",
        # speaks once more during the grace period, then hangs as well
        "import time\nreport('begin', step=0)\ntime.sleep(0.9)\nreport('waiting', step=0)\n"
        "time.sleep(3600)",
    ]
    t0 = time.monotonic()
    # first_report_s: a busy machine's interpreter start-up is not the stall under test
    supervisor = Supervisor(
        Scripted(tmp_path, scripts, grace_s=3.0), stall_s=0.6, first_report_s=600
    )
    out = supervisor.start().wait()
    took = time.monotonic() - t0
    assert out.ending == "stalled" and out.stopped == frozenset({0, 1})
    assert out.returncodes == {0: -signal.SIGKILL, 1: -signal.SIGKILL}
    assert [r.kind for r in out.reports[1]] == ["begin", "waiting"]
    # 0.9 s to the last report, then 0.6 s of stall and 3.0 s of grace
    assert 4.5 < took < 120.0, took


@pytest.mark.slow
def test_a_process_stopped_by_a_signal_is_named_frozen_and_the_run_ended(tmp_path):
    """SIGSTOP leaves a process standing in state T: never moving by itself, so it is named
    and the run ended without waiting for any stall time (none is given here). Rank 0 sleeps
    an hour meanwhile: a sleeping process (state S) is never taken for a frozen one."""
    scripts = [
        "import time\nreport('begin')\ntime.sleep(3600)",
        "import os, signal\nreport('begin')\nos.kill(os.getpid(), signal.SIGSTOP)",
    ]
    out = supervise(Scripted(tmp_path, scripts, grace_s=0.3), frozen_after_s=0.5)
    assert out.frozen == frozenset({1})
    assert out.stopped == frozenset({0, 1})  # both killed by the supervisor
    assert out.returncodes == {0: -signal.SIGKILL, 1: -signal.SIGKILL}


@pytest.mark.slow
def test_a_process_stopped_then_continued_is_not_frozen(tmp_path):
    """Stopped for a moment (a Ctrl-Z and ``fg``) and moving again: its stop does not count
    toward ``frozen_after_s`` any more. The watch is read at chosen moments (no race): seen
    stopped, continued, then read again long after the stop began."""
    from explorer.processes import process_state

    scripts = [
        "import os, signal\nreport('begin')\nos.kill(os.getpid(), signal.SIGSTOP)\nreport('end')",
    ]
    sup = Supervisor(Scripted(tmp_path, scripts), frozen_after_s=5.0).start()
    pid = sup.procs[0].pid
    deadline = time.monotonic() + 120
    while process_state(pid) != "T":
        assert time.monotonic() < deadline, "the child never stopped itself"
        time.sleep(0.02)
    assert not sup._freeze_seen(1000.0)  # stopped, first seen now
    assert sup._freeze_seen(1006.0) and sup.frozen == {0}  # still stopped 6 s on: frozen
    sup.frozen.clear()
    os.kill(pid, signal.SIGCONT)
    while process_state(pid) == "T":
        assert time.monotonic() < deadline, "the child never went on"
        time.sleep(0.02)
    assert not sup._freeze_seen(2000.0)  # moving again: its earlier stop is forgotten
    out = sup.wait()
    assert out.ending == "finished" and out.frozen == frozenset()
    assert [r.kind for r in out.reports[0]] == ["begin", "end"]


@pytest.mark.slow
def test_after_a_failure_the_others_get_the_grace_then_are_killed(tmp_path):
    scripts = [
        "import time\nreport('begin')\ntime.sleep(3600)",
        "import time\ntime.sleep(0.3)\nraise RuntimeError('own fault')",
    ]
    out = supervise(Scripted(tmp_path, scripts, grace_s=0.8))
    # rank 0 sleeps an hour: killed is the proof it was not waited for (no wall-time bound)
    assert out.ending == "failed" and out.stopped == frozenset({0})
    assert out.returncodes == {0: -signal.SIGKILL, 1: 1}


@pytest.mark.slow
def test_a_hard_timeout_ends_the_run_at_once(tmp_path):
    """The deadline counts from the start, so it leaves a busy machine's interpreter start-up
    (seconds under load) time to tick a few times first."""
    out = supervise(
        Scripted(tmp_path, ["import time\nwhile True:\n    report('tick'); time.sleep(0.05)"]),
        stall_s=60.0,
        timeout_s=5.0,
    )
    assert out.ending == "timeout" and out.returncodes == {0: -signal.SIGKILL}
    assert len(out.reports[0]) > 3  # it kept reporting: not a stall, a timeout


@pytest.mark.slow
def test_its_grandchildren_die_with_it_and_a_stranger_survives(tmp_path):
    """A grandchild in the child's process group is killed, even after the child itself ended;
    a process the supervisor did not start lives on."""
    stranger = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(3600)"], start_new_session=True
    )
    pidfile = tmp_path / "grandchild.pid"
    try:
        scripts = [
            # starts a grandchild (same process group), then exits 0 at once
            "import subprocess\n"
            "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(g.pid))\n"
            "report('done')",
            # reports only once rank 0 said done, then is silent: the stall that ends it can
            # never catch rank 0 still starting on a busy machine
            "import time\nfrom pathlib import Path\n"
            "done = Path(os.environ['REPORT_FILE']).with_name('rank0.jsonl')\n"
            "while not (done.exists() and 'done' in done.read_text()):\n"
            "    time.sleep(0.02)\n"
            "report('begin')\ntime.sleep(3600)",
        ]
        out = (
            Supervisor(Scripted(tmp_path, scripts), stall_s=2.0, first_report_s=600).start().wait()
        )
        grandchild = int(_wait_for(pidfile))
        assert out.returncodes[0] == 0 and out.stopped == frozenset({1})
        end = time.monotonic() + 5.0
        while _alive(grandchild) and time.monotonic() < end:
            time.sleep(0.05)
        assert not _alive(grandchild), "the grandchild outlived the supervisor"
        assert stranger.poll() is None and _alive(stranger.pid), "a stranger was killed"
    finally:
        stranger.kill()
        stranger.wait()


class Piped(Engine):
    """One child whose reports are marked stdout lines (the XLA child's protocol)."""

    MARK = "@@report "

    def __init__(self, folder: Path, script: str) -> None:
        self.folder, self.script = folder, script

    def children(self) -> list[Child]:
        return [
            Child(
                0,
                [sys.executable, "-u", "-c", textwrap.dedent(self.script)],
                dict(os.environ),
                self.folder / "stderr.txt",
                pipe_stdout=True,
            )
        ]

    def read_line(self, rank: int, line: str) -> Optional[Report]:
        at = line.find(self.MARK)
        if at < 0:
            return None
        doc = json.loads(line[at + len(self.MARK) :])
        return Report(rank, doc.pop("event"), doc)


@pytest.mark.slow
def test_piped_stdout_reports_arrive_live_and_other_output_is_kept(tmp_path):
    """Live by construction: the child prints its second report only once the supervisor has
    passed on the first (a file the callback writes); reports read at the end would leave it
    waiting, and it would exit 9 instead of 4."""
    go = tmp_path / "first-report-arrived"
    script = f"""
        import json, os, sys, time
        print('hello from the user step')
        for step in range(3):
            print('@@report ' + json.dumps({{'event': 'step', 'step': step}}), flush=True)
            end = time.monotonic() + 120
            while not os.path.exists({str(go)!r}):
                if time.monotonic() > end:
                    sys.exit(9)
                time.sleep(0.01)
        print('oops', file=sys.stderr)
        sys.exit(4)
    """
    out = supervise(Piped(tmp_path, script), on_report=lambda new: go.touch())
    assert [r.data["step"] for r in out.reports[0]] == [0, 1, 2]
    assert out.output[0] == ["hello from the user step"]
    assert out.returncodes == {0: 4} and out.ending == "failed"
    assert "oops" in (tmp_path / "stderr.txt").read_text()


@pytest.mark.slow
def test_a_slow_start_is_not_a_stall_and_silence_after_a_report_is(tmp_path):
    """Before any report, ``first_report_s`` bounds the silence (imports and rendezvous take long
    on a busy machine); after one, ``stall_s``. The child reports only once the test opens its
    gate, well past ``stall_s``: with ``first_report_s`` it runs to the end, without it the
    silence is a stall. No verdict rests on how fast the machine is."""
    gate = tmp_path / "gate"
    slow_start = [
        f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
        "report('begin', step=0)"
    ]
    supervisor = Supervisor(Scripted(tmp_path, slow_start), stall_s=0.3, first_report_s=600.0)
    supervisor.start()
    opener = threading.Timer(1.5, gate.touch)
    opener.start()
    out = supervisor.wait()
    opener.join()
    assert out.ending == "finished" and [r.kind for r in out.reports[0]] == ["begin"]

    gate.unlink()
    (tmp_path / "b").mkdir()
    out = Supervisor(Scripted(tmp_path / "b", slow_start), stall_s=0.3).start().wait()
    assert out.ending == "stalled" and out.stopped == frozenset({0})

    # After the first report the short limit holds: stalled, long before the hard timeout
    # (a first_report_s wrongly kept would run into the timeout instead).
    silent = ["import time\nreport('begin', step=0)\ntime.sleep(3600)"]
    (tmp_path / "c").mkdir()
    out = (
        Supervisor(
            Scripted(tmp_path / "c", silent), stall_s=0.3, first_report_s=600.0, timeout_s=60.0
        )
        .start()
        .wait()
    )
    assert out.ending == "stalled" and [r.kind for r in out.reports[0]] == ["begin"]
