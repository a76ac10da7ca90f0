"""Start an engine's processes, pass on what they report, and end them: the one supervisor.

Rules, the same for every engine:

* Each process starts in its own session, so it leads a process group of its own; anything it
  starts (a compiler, a helper) joins that group. Ending a process means ``SIGKILL`` to its
  whole group, and only to groups this supervisor started: nothing else on the machine is
  touched. Exits are detected without reaping (``waitid`` with ``WNOWAIT``), so until the
  final kill every group leader is at least a zombie and its group id cannot be reused by an
  unrelated process; the last kill therefore also reaches what an already-ended process left
  behind in its group.
* Every report goes to ``on_report`` as it arrives (a list per poll), as typed :class:`Report`
  records; turning them into words is for the caller.
* When a process ends badly, the others get the engine's grace (:meth:`Engine.grace_s`) to
  say their own part (a peer gone, a receive timed out), then every process still alive is
  killed. The same grace follows a stall: no report for ``stall_s`` seconds, counted from the
  last report, or from the start while no process has reported yet and ``first_report_s`` (the
  longer time a start may take: imports, rendezvous, a busy machine) is not past. A hard
  ``timeout_s`` kills at once.
* A process stopped by a signal (``SIGSTOP``, ``SIGTSTP``: state ``T`` in ``/proc``) for
  ``frozen_after_s`` counts as one that ended badly, and is named in ``frozen``: it will never
  move again by itself, so waiting for its neighbours' receive timeouts would only delay the
  verdict. A process that is merely slow, sleeps or waits is never in that state, and neither is
  one a debugger or ``py-spy`` holds (state ``t``): only the stop signal puts a process there.
* The answer (:class:`Supervised`) holds every process's exit status (negative: the signal),
  whether the supervisor had to kill it, and everything each one reported.

Why not ``torch.distributed.elastic.multiprocessing.start_processes``: its subprocess handler
does the same process-group start and ``killpg`` (we follow it there), but its context closes
every worker the moment one fails (no grace for the others to report, which is the whole
point of a multi-rank failure record), has no stall back-stop and no live event stream (it
only redirects output to files), kills the groups of still-running workers only (what an
ended worker left in its group survives), installs SIGTERM/SIGINT handlers in the calling
process (a notebook kernel), and imports torch in the parent, which the XLA parent and the
CLI's light refusal paths must not do. Its ``RunProcsResult`` (failures and per-rank output
by local rank) is the model for :class:`Supervised`.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Literal, Optional, Union

from explorer.processes.engine import Child, Engine, Report
from explorer.processes.ranks import process_state
from explorer.processes.warm import ForkedRank, Template, exit_status, kill_group, warm_plan

__all__ = ["Ending", "Exit", "Supervised", "Supervisor", "supervise"]

#: Why the watch ended: every process ended on its own (``finished``, ``failed``), or the
#: supervisor ended them (``stalled``: no report for too long; ``timeout``: past the deadline).
Ending = Literal["finished", "failed", "stalled", "timeout"]
OnReport = Callable[[list[Report]], None]
POLL_S = 0.05
#: A process the supervisor started: a fresh interpreter, or a rank forked from a warm template.
Process = Union[subprocess.Popen, ForkedRank]
#: How often the processes' states are read from ``/proc`` (for ``frozen_after_s``).
STATE_EVERY_S = 0.25


@dataclass(frozen=True)
class Exit:
    """How one process ended: exit status (negative: killed by that signal), and whether we killed it."""

    rank: int
    pid: int
    returncode: int
    stopped: bool


@dataclass
class Supervised:
    """The outcome of a supervised run (see the module docstring)."""

    exits: dict[int, Exit]
    reports: dict[int, list[Report]]
    ending: Ending
    seconds: float
    #: Stdout lines of piped children that were not reports, per rank (their own prints).
    output: dict[int, list[str]] = field(default_factory=dict)
    #: Ranks whose process stood stopped by a signal (state ``T``) for ``frozen_after_s``.
    frozen: frozenset[int] = frozenset()

    @property
    def returncodes(self) -> dict[int, int]:
        return {r: e.returncode for r, e in self.exits.items()}

    @property
    def stopped(self) -> frozenset[int]:
        """Ranks the supervisor killed because they had not ended on their own."""
        return frozenset(r for r, e in self.exits.items() if e.stopped)

    @property
    def ok(self) -> bool:
        return self.ending == "finished"


def _kill_group(proc: Process) -> None:
    """SIGKILL the process group ``proc`` leads (a forked rank: itself first, see ``kill_rank``)."""
    if isinstance(proc, ForkedRank):
        proc.kill_group()
    else:
        kill_group(proc.pid)


class Supervisor:
    """Runs one engine's processes under the rules in the module docstring."""

    def __init__(
        self,
        engine: Engine,
        *,
        on_report: Optional[OnReport] = None,
        stall_s: Optional[float] = None,
        timeout_s: Optional[float] = None,
        poll_s: float = POLL_S,
        frozen_after_s: Optional[float] = None,
        first_report_s: Optional[float] = None,
    ) -> None:
        self.engine, self.on_report = engine, on_report
        self.stall_s, self.timeout_s, self.poll_s = stall_s, timeout_s, poll_s
        self.first_report_s = first_report_s
        self.frozen_after_s = frozen_after_s
        self.frozen: set[int] = set()
        self._held: dict[int, float] = {}  # rank -> when its process was first seen stopped
        self._states_read = 0.0
        self.procs: dict[int, Process] = {}
        self.template: Optional[Template] = None
        self.reports: dict[int, list[Report]] = {}
        self.output: dict[int, list[str]] = {}
        self._ended: dict[int, int] = {}
        self._stopped: set[int] = set()
        self._lines: "queue.Queue[tuple[int, Optional[str]]]" = queue.Queue()
        self._readers: list[threading.Thread] = []
        self._started = 0.0

    # -- start ---------------------------------------------------------------------------------
    def start(self) -> "Supervisor":
        """Start every child (each leads its own process group); on a failed start, end those started."""
        self._started = time.monotonic()
        try:
            children = list(self.engine.children())
            plan = warm_plan(children)
            if plan is not None:
                self.template = Template(plan)
                for rank, forked in self.template.ranks.items():
                    self.procs[rank] = forked
                    self.reports.setdefault(rank, [])
            for child in children:
                if child.rank not in self.procs:
                    self._spawn(child)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, child: Child) -> None:
        with open(child.log, "wb") as log:
            proc = subprocess.Popen(
                list(child.argv),
                env=dict(child.env),
                cwd=child.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if child.pipe_stdout else log,
                stderr=log if child.pipe_stdout else subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[child.rank] = proc
        self.reports.setdefault(child.rank, [])
        if child.pipe_stdout:
            reader = threading.Thread(
                target=self._pump, args=(child.rank, proc.stdout), daemon=True
            )
            reader.start()
            self._readers.append(reader)

    def _pump(self, rank: int, stream: IO[bytes]) -> None:
        """Thread: hand each stdout line of ``rank`` to the watch loop (None at end of stream)."""
        for raw in iter(stream.readline, b""):
            self._lines.put((rank, raw.decode("utf-8", "replace")))
        self._lines.put((rank, None))

    # -- watch ---------------------------------------------------------------------------------
    def running(self) -> list[int]:
        """Ranks whose process has not ended yet."""
        for rank, proc in self.procs.items():
            if rank not in self._ended:
                code = proc.ended() if isinstance(proc, ForkedRank) else exit_status(proc.pid)
                if code is not None:
                    self._ended[rank] = code
        return [r for r in self.procs if r not in self._ended]

    def _freeze_seen(self, now: float) -> bool:
        """Read the running processes' states (every ``STATE_EVERY_S``); True once a process
        has stood stopped by a signal for ``frozen_after_s`` (it is then in ``frozen``)."""
        if self.frozen_after_s is None or now - self._states_read < STATE_EVERY_S:
            return bool(self.frozen)
        self._states_read = now
        for rank in (r for r in self.procs if r not in self._ended):  # as the loop just polled
            pid = self.procs[rank].pid
            if pid is None or process_state(pid) != "T":
                self._held.pop(rank, None)  # moving again (SIGCONT): not frozen
                continue
            if now - self._held.setdefault(rank, now) >= self.frozen_after_s:
                self.frozen.add(rank)
        return bool(self.frozen)

    def _collect(self) -> list[Report]:
        new = list(self.engine.read())
        while True:
            try:
                rank, line = self._lines.get_nowait()
            except queue.Empty:
                break
            if line is None:
                continue
            report = self.engine.read_line(rank, line)
            if report is None:
                if line.strip():
                    self.output.setdefault(rank, []).append(line.rstrip("\n"))
            else:
                new.append(report)
        for report in new:
            self.reports.setdefault(report.rank, []).append(report)
        if new and self.on_report is not None:
            self.on_report(new)
        return new

    def wait(self) -> Supervised:
        """Watch until every process ended or was ended (see the module docstring)."""
        ending: Ending = "finished"
        deadline = None if self.timeout_s is None else self._started + self.timeout_s
        last_report, first_bad, stalled_at = time.monotonic(), None, None
        reported = False
        try:
            while self.running():
                time.sleep(self.poll_s)
                now = time.monotonic()
                if self._collect():
                    last_report, stalled_at, reported = now, None, True
                if first_bad is None and any(c != 0 for c in self._ended.values()):
                    first_bad = now
                if first_bad is None and self._freeze_seen(now):
                    first_bad = now  # it will not move again: the others get their grace
                limit = self._stall_limit(reported)
                if stalled_at is None and limit is not None and now - last_report > limit:
                    stalled_at = now
                if deadline is not None and now > deadline:
                    ending = "timeout"
                    break
                grace = self.engine.grace_s()
                if first_bad is not None and now - first_bad > grace:
                    break
                if stalled_at is not None and now - stalled_at > grace:
                    ending = "stalled"
                    break
        finally:
            self.stop()
        self._collect()
        if ending == "finished" and any(c != 0 for r, c in self._ended.items()):
            ending = "failed"
        exits = {
            r: Exit(r, p.pid if p.pid is not None else -1, p.wait(), r in self._stopped)
            for r, p in self.procs.items()
        }
        return Supervised(
            exits,
            self.reports,
            ending,
            time.monotonic() - self._started,
            self.output,
            frozenset(self.frozen),
        )

    def _stall_limit(self, reported: bool) -> Optional[float]:
        """Seconds without a report that make a stall: ``stall_s``, or before any report the
        longer of it and ``first_report_s``."""
        if reported or self.first_report_s is None or self.stall_s is None:
            return self.stall_s
        return max(self.stall_s, self.first_report_s)

    # -- end -----------------------------------------------------------------------------------
    def kill(self, rank: int) -> None:
        """SIGKILL ``rank``'s process group, if its process has not ended (nor been reaped)."""
        proc = self.procs.get(rank)
        if proc is not None and proc.returncode is None and rank not in self._ended:
            _kill_group(proc)

    def stop(self) -> None:
        """SIGKILL every process group we started (also of ended leaders: see above), then reap
        (a template reaps its own ranks once told that the run is over)."""
        self.running()
        for rank, proc in self.procs.items():
            if proc.returncode is not None:
                continue  # already reaped: its group id is no longer ours to signal
            if rank not in self._ended:
                self._stopped.add(rank)  # one not forked yet: the template ends it (finish)
            _kill_group(proc)
        if self.template is not None:
            self.template.finish()
        for proc in self.procs.values():
            proc.wait()
        for reader in self._readers:
            reader.join(timeout=5.0)  # a process that left our group may hold the pipe: not forever

    def ended_so_far(self) -> tuple[dict[int, Optional[int]], frozenset[int]]:
        """Each process's exit status and the ranks this supervisor killed, after :meth:`stop`
        (a watch cut short by Ctrl-C or SIGTERM still says how each rank ended)."""
        return {r: p.returncode for r, p in self.procs.items()}, frozenset(self._stopped)

    def __enter__(self) -> "Supervisor":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def supervise(
    engine: Engine,
    *,
    on_report: Optional[OnReport] = None,
    stall_s: Optional[float] = None,
    timeout_s: Optional[float] = None,
    poll_s: float = POLL_S,
    frozen_after_s: Optional[float] = None,
    first_report_s: Optional[float] = None,
) -> Supervised:
    """Start ``engine``'s processes and watch them to the end (see :class:`Supervisor`)."""
    return (
        Supervisor(
            engine,
            on_report=on_report,
            stall_s=stall_s,
            timeout_s=timeout_s,
            poll_s=poll_s,
            frozen_after_s=frozen_after_s,
            first_report_s=first_report_s,
        )
        .start()
        .wait()
    )
