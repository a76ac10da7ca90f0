"""Launch a real pipeline from Python: one process per rank on this machine, watched to the end.

The processes are started exactly as ``torchrun`` starts its workers (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``) running
:mod:`.worker`, so the notebook and a multi-machine ``torchrun`` job execute the same code.

Before launch the schedule goes through the analysis: one that deadlocks, or has a send
without its receive, is refused with the analysis' finding. While it runs the launcher
watches the processes: when one ends badly, the others get a short grace to report their own
view, then every process still alive is killed (each runs in its own session, killed by its
process group), so no process is left behind. A run that makes no progress for longer than
the stall timeout is ended the same way; the ranks' own receive timeouts name the waiting stages.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional, Union

from explorer.analysis import check
from explorer.runtime.pipeline.spec import BUILTIN_MODELS, RunSpec
from explorer.schedules.schedule import Schedule
from explorer.traces.pipeline.folder import RunFolderLock, new_run_id
from explorer.traces.pipeline.follow import Follower
from explorer.traces.pipeline.result import RunResult, collect, refused, write_exit_codes

GRACE_S = 1.5  # after the first failure, time for the other ranks to write their own account
POLL_S = 0.05

Progress = Callable[[Follower], None]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def preflight(schedule: Schedule) -> Optional[RunResult]:
    """The analysis' verdict on whether the schedule can run at all; None when it can."""
    findings = check(schedule, other_model=False).findings
    if findings.deadlock is not None:
        d = findings.deadlock
        waiting = (d.cycle or d.stuck)[0].at
        return refused(
            f"the analysis finds a deadlock: {d.describe()}",
            {
                "rank": waiting.rank,
                "stage": waiting.stage,
                "step": waiting.step,
                "instruction": waiting.deepspeed_repr,
            },
        )
    if findings.unmatched:
        u = findings.unmatched[0]
        return refused(
            f"the analysis finds an exchange without a partner: {u.describe()}",
            {
                "rank": u.at.rank,
                "stage": u.at.stage,
                "step": u.at.step,
                "instruction": u.at.deepspeed_repr,
            },
        )
    return None


class Launch:
    """The processes of one run, and the watch over them (see the module docstring)."""

    def __init__(self, spec: RunSpec, folder: Union[None, str, Path] = None) -> None:
        self.spec = replace(spec, run_id=spec.run_id or new_run_id())
        self.schedule = spec.build_schedule()
        self.folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="explorer-run-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.follower = Follower(self.folder, self.spec.run_id)
        self.procs: dict[int, subprocess.Popen] = {}
        self.stopped: set[int] = set()
        self._lock: Optional[RunFolderLock] = None

    def start(self) -> "Launch":
        self._lock = RunFolderLock.claim(
            self.folder, self.spec.run_id
        )  # refused if another run writes there
        self.spec.write(self.folder)
        world, port = self.spec.world_size, free_port()
        path = os.pathsep.join(
            p for p in [os.getcwd(), *sys.path, os.environ.get("PYTHONPATH", "")] if p
        )
        for rank in range(world):
            env = {
                **os.environ,
                "RANK": str(rank),
                "WORLD_SIZE": str(world),
                "LOCAL_RANK": str(rank),
                "LOCAL_WORLD_SIZE": str(world),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "PYTHONPATH": path,
                "OMP_NUM_THREADS": str(self.spec.threads),
            }
            log = open(self.folder / f"rank{rank}.log", "wb")
            self.procs[rank] = subprocess.Popen(
                [sys.executable, "-m", "explorer.runtime.pipeline.worker", str(self.folder)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
        return self

    def poll(self) -> bool:
        """True while any rank runs."""
        return any(p.poll() is None for p in self.procs.values())

    def wait(
        self, progress: Optional[Progress] = None, timeout_s: Optional[float] = None
    ) -> RunResult:
        """Watch until every rank ended (killing the rest after a failure); collect the folder."""
        first_bad: Optional[float] = None
        last_change, seen = time.monotonic(), 0
        # A stalled rank's own receive times out after stall_timeout_s; this is the backstop.
        backstop = self.spec.stall_timeout_s + 15.0
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        try:
            while self.poll():
                time.sleep(POLL_S)
                now = time.monotonic()
                if self.follower.poll() or len(self.follower.events) != seen:
                    last_change, seen = now, len(self.follower.events)
                    if progress:
                        progress(self.follower)
                if first_bad is None and any(
                    p.poll() not in (None, 0) for p in self.procs.values()
                ):
                    first_bad = now
                if (
                    (first_bad is not None and now - first_bad > self._grace())
                    or now - last_change > backstop
                    or (deadline is not None and now > deadline)
                ):
                    self.stop()
        finally:
            self.stop()
        self.follower.poll()
        if progress:
            progress(self.follower)
        codes = {r: p.returncode for r, p in self.procs.items()}
        write_exit_codes(
            self.folder, self.spec.run_id, codes, frozenset(self.stopped), self.spec.stall_timeout_s
        )
        if self._lock is not None:
            self._lock.release()
        return collect(
            self.folder,
            self.schedule,
            codes,
            frozenset(self.stopped),
            self.spec.stall_timeout_s,
            run_id=self.spec.run_id,
        )

    def _grace(self) -> float:
        """How long the other ranks get to write their own account after the first one failed.

        After a stall the others are stalled too, but each one's receive times out on its own
        clock, a little later when the machine is busy: wait for them (up to the stall timeout
        again), so the failure names every waiting stage, not just the first.
        """
        if any(
            e["type"] == "failure" and e.get("cause") == "timeout" for e in self.follower.events
        ):
            return max(GRACE_S, self.spec.stall_timeout_s + 2.0)
        return GRACE_S

    def stop(self) -> None:
        """Kill every rank still alive, by its process group, and reap it."""
        for rank, proc in self.procs.items():
            if proc.poll() is None:
                self.stopped.add(rank)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for proc in self.procs.values():
            proc.wait()


def run_pipeline(
    spec: RunSpec,
    folder: Union[None, str, Path] = None,
    *,
    progress: Optional[Progress] = None,
    check_first: bool = True,
    timeout_s: Optional[float] = None,
) -> RunResult:
    """Run ``spec`` for real and return its :class:`RunResult` (refused when the analysis says it cannot run)."""
    if check_first:
        verdict = preflight(spec.build_schedule())
        if verdict is not None:
            return verdict
    _validate_model(spec)
    return Launch(spec, folder).start().wait(progress, timeout_s)


def _validate_model(spec: RunSpec) -> None:
    """Build and split the model first, so a bad ``--model`` is one InputError, not N dead ranks.

    A built-in model is built here; a user's function only in a child process (it may exit,
    crash or hang: see :mod:`.model_check`).
    """
    stages = spec.build_schedule().num_stages
    if spec.model.name not in BUILTIN_MODELS:
        from explorer.runtime.pipeline.model_check import check_user_model

        check_user_model(spec.to_json()["model"], stages, spec.microbatch_size, spec.seed)
        return
    from explorer.runtime.pipeline.models import build_model

    build_model(spec.model, stages, spec.microbatch_size, spec.seed)
