"""Launch a real pipeline from Python: one process per rank on this machine, watched to the end.

The processes are started exactly as ``torchrun`` starts its workers (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``) running
:mod:`.worker`, so the notebook and a multi-machine ``torchrun`` job execute the same code.

Before launch the schedule goes through the analysis: one that deadlocks, or has a send
without its receive, is refused with the analysis' finding. While it runs, the
supervisor (:mod:`explorer.processes`) watches the processes: when one ends badly, the
others get a short grace to report their own view, then every process still alive is killed
(each leads its own process group), so no process is left behind. A run that makes no progress
for longer than the stall timeout is ended the same way; the ranks' own receive timeouts name
the waiting stages, and the run's result carries the doctor's verdict on what they wrote
(``details["hang"]``, :func:`stall_diagnosis`). :class:`PipelineEngine` is what this engine
tells the supervisor.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional, Union

from explorer.errors import InputError
from explorer.failure import FailureKind
from explorer.pipeline.analysis import check
from explorer.pipeline.analysis.contract import judged, pairing_of
from explorer.pipeline.runtime.doctor import doctor
from explorer.pipeline.runtime.spec import (
    BUILTIN_MODELS,
    RUN_ID_VARIABLE,
    RunSpec,
    device_refusal,
)
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.folder import RunFolderLock, new_run_id
from explorer.pipeline.traces.follow import Follower, failure_kind
from explorer.pipeline.traces.result import PipelineRunResult, collect, refused, write_exit_codes
from explorer.processes import (
    GRACE_S,
    Child,
    Engine,
    Report,
    Supervisor,
    free_port,
    rank_env,
)
from explorer.processes.orphan import LAUNCHER_PID

Progress = Callable[[Follower], None]


def preflight(schedule: Schedule) -> Optional[PipelineRunResult]:
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


#: The module each rank runs (``python -m``), by ``RunSpec.engine``: DeepSpeed's own engine
#: (:mod:`explorer.pipeline.runtime.deepspeed.worker`) is started and watched exactly like ours.
WORKERS = {
    "explorer": "explorer.pipeline.runtime.worker",
    "deepspeed": "explorer.pipeline.runtime.deepspeed.worker",
}
#: Extra seconds of silence allowed, by engine, before the first report (its own imports and
#: set-up: 4 processes importing torch and deepspeed and building the engine take 13-30 s here).
STARTUP_S = {"explorer": 0.0, "deepspeed": 120.0}
#: How long ranks may take to write their first record (import torch, join the process group)
#: before their silence counts as a stall; later the stall clock is the short one above. On a
#: 2-core machine running other jobs four ranks took over 18 s to start, and a run with a 3 s
#: stall timeout was ended before any rank had said a word.
FIRST_REPORT_S = 120.0
#: A rank that reported its failure but stays alive (a job that swallows the error) is ended
#: this many seconds after its report; the supervisor then ends the others after its grace.
LINGER_S = 5.0
#: A rank whose process stands stopped by a signal this long is named at once (see
#: :mod:`explorer.processes.watch`): its neighbours' receive timeouts would only come later.
FROZEN_S = 2.0


def refuse_impossible_devices(spec: RunSpec) -> None:
    """Raise :class:`InputError` for a device/backend pair this machine cannot run (see ``device_refusal``)."""
    if spec.device != "cuda":
        return
    import torch

    local = int(os.environ.get("LOCAL_WORLD_SIZE", spec.world_size))
    why = device_refusal(spec.engine, spec.backend, spec.device, local, torch.cuda.device_count())
    if why is not None:
        raise InputError(why)


class PipelineEngine(Engine):
    """A pipeline on the supervisor: one worker per rank (:data:`WORKERS`), reports from ``rank<R>.jsonl``."""

    def __init__(self, spec: RunSpec, folder: Path, follower: Follower) -> None:
        self.spec, self.folder, self.follower = spec, folder, follower
        self._seen = 0

    def children(self) -> list[Child]:
        """One worker per rank. On CPU they are forked from one template (:mod:`explorer.processes.template`);
        on CUDA each starts afresh: DeepSpeed's import may ask CUDA for its devices, and a
        process forked after that cannot use CUDA. DeepSpeed is told its accelerator in the
        environment (what its worker would set first), so that its import does not look."""
        world, port = self.spec.world_size, free_port()
        on_cpu = self.spec.device == "cpu"
        accelerator = os.environ.get("DS_ACCELERATOR") or ("cpu" if on_cpu else "cuda")
        return [
            Child(
                rank,
                [sys.executable, "-m", WORKERS[self.spec.engine], str(self.folder)],
                {
                    **rank_env(rank, world, port, threads=self.spec.threads),
                    RUN_ID_VARIABLE: self.spec.run_id,  # it reads only its own run's spec
                    LAUNCHER_PID: str(os.getpid()),  # it ends with this process (.orphan)
                    **({"DS_ACCELERATOR": accelerator} if self.spec.engine == "deepspeed" else {}),
                },
                self.folder / f"rank{rank}.log",
                warm=on_cpu,
            )
            for rank in range(world)
        ]

    def read(self) -> list[Report]:
        """Every new line of the ranks' trace files: instruction records, then other events."""
        new = [Report(r["rank"], "instr", r) for r in self.follower.poll()]
        events, self._seen = self.follower.events[self._seen :], len(self.follower.events)
        return new + [Report(int(e["rank"]), str(e.get("type")), e) for e in events]

    def grace_s(self) -> float:
        """How long the other ranks get to write their own account after the first one failed.

        After a stall the others are stalled too, but each one's receive times out on its own
        clock, later when the machine is busy (a rank that started late reaches its blocking
        exchange late): wait for them, up to twice the stall timeout, so the failure names every
        waiting stage, not just the first. Ranks that have reported exit, which ends the wait early.
        """
        if any(
            e["type"] == "failure" and failure_kind(e) == FailureKind.TIMEOUT
            for e in self.follower.events
        ):
            return max(GRACE_S, 2.0 * self.spec.stall_timeout_s + 2.0)
        return GRACE_S


class Launch:
    """The processes of one run, and the watch over them (see the module docstring)."""

    def __init__(self, spec: RunSpec, folder: Union[None, str, Path] = None) -> None:
        refuse_impossible_devices(spec)
        self.spec = replace(spec, run_id=spec.run_id or new_run_id())
        self.schedule = spec.build_schedule()
        self.folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="explorer-run-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.follower = Follower(self.folder, self.spec.run_id)
        self.engine = PipelineEngine(self.spec, self.folder, self.follower)
        self.supervisor: Optional[Supervisor] = None
        self._progress: Optional[Progress] = None
        self._lock: Optional[RunFolderLock] = None
        self._linger: Optional[threading.Timer] = None

    def start(self, timeout_s: Optional[float] = None) -> "Launch":
        self._lock = RunFolderLock.claim(
            self.folder, self.spec.run_id
        )  # refused if another run writes there
        self.spec.write(self.folder)
        self.supervisor = Supervisor(
            self.engine,
            on_report=self._on_report,
            # A stalled rank's own receive times out after stall_timeout_s; this is the backstop.
            stall_s=self.spec.stall_timeout_s + 15.0 + STARTUP_S[self.spec.engine],
            timeout_s=timeout_s,
            frozen_after_s=FROZEN_S,
            # before the first record: imports and rendezvous, slow on a busy machine
            first_report_s=self.spec.stall_timeout_s + 15.0 + FIRST_REPORT_S,
        ).start()
        return self

    def _on_report(self, new: list[Report]) -> None:
        failed = next((r.rank for r in new if r.kind == "failure"), None)
        if failed is not None and self._linger is None:
            self._linger = threading.Timer(LINGER_S, self._end_lingering, args=(failed,))
            self._linger.daemon = True
            self._linger.start()
        if self._progress is not None:
            self._progress(self.follower)

    def _end_lingering(self, rank: int) -> None:
        """SIGKILL ``rank``'s process group if it is still alive after reporting its failure."""
        if self.supervisor is not None:
            self.supervisor.kill(rank)

    def poll(self) -> bool:
        """True while any rank runs. The run ends for its folder only in :meth:`wait` (how each
        rank ended is written, the folder's lock let go) or :meth:`stop`: until then a read of
        the folder says it is still running."""
        return self.supervisor is not None and bool(self.supervisor.running())

    def wait(
        self, progress: Optional[Progress] = None, timeout_s: Optional[float] = None
    ) -> PipelineRunResult:
        """Watch until every rank ended (killing the rest after a failure); collect the folder."""
        if self.supervisor is None:
            self.start(timeout_s)
        elif timeout_s is not None:
            self.supervisor.timeout_s = timeout_s
        assert self.supervisor is not None
        self._progress = progress
        try:
            out = self.supervisor.wait()
            self.follower.poll()  # every line the ranks wrote before they ended
            self.follower.job_ended = True  # a rank with no end written is stopped, not running
            if progress:
                progress(self.follower)
            codes: dict[int, Optional[int]] = dict(out.returncodes)
            write_exit_codes(
                self.folder,
                self.spec.run_id,
                codes,
                out.stopped,
                self.spec.stall_timeout_s,
                out.frozen,
            )
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP to the explorer program
            codes, stopped = self.supervisor.ended_so_far()  # its watch ended every rank
            write_exit_codes(
                self.folder,
                self.spec.run_id,
                codes,
                stopped,
                self.spec.stall_timeout_s,
                interrupted=getattr(exc, "name", "SIGINT"),
            )
            raise
        finally:
            if self._linger is not None:
                self._linger.cancel()
            if self._lock is not None:
                self._lock.release()
        result = collect(
            self.folder,
            self.schedule,
            codes,
            out.stopped,
            self.spec.stall_timeout_s,
            run_id=self.spec.run_id,
            frozen=out.frozen,
        )
        result = judged(result, self.schedule, pairing_of(self.spec.p2p_tags))
        hang = stall_diagnosis(result)
        if hang is not None:
            result.details["hang"] = hang
        return result

    def stop(self) -> None:
        """Kill every rank still alive, by its process group, and reap it; the folder is let
        go (another run may start there)."""
        if self.supervisor is not None:
            self.supervisor.stop()
        if self._linger is not None:
            self._linger.cancel()
        if self._lock is not None:
            self._lock.release()


def stall_diagnosis(result: PipelineRunResult) -> Optional[dict]:
    """The doctor's verdict (as JSON) on a run that ended by a stall, from what its ranks wrote.

    The ranks are gone by then, so no stack is read: each waiting rank's ``failure`` line says
    where and on whom it waited, and the silent rank's last step where it stopped. That is the
    same verdict ``explorer doctor FOLDER`` gives afterwards; None for any other ending.
    """
    if result.failure is None or result.failure.kind != FailureKind.TIMEOUT or not result.folder:
        return None
    try:
        return doctor([], Path(result.folder)).verdict.to_dict()
    except (InputError, OSError, ValueError):  # no rank's lines, or unreadable: the failure says it
        return None


def run_pipeline(
    spec: RunSpec,
    folder: Union[None, str, Path] = None,
    *,
    progress: Optional[Progress] = None,
    check_first: bool = True,
    timeout_s: Optional[float] = None,
) -> PipelineRunResult:
    """Run ``spec`` for real and return its :class:`PipelineRunResult` (refused when the analysis says it cannot run)."""
    if check_first:
        verdict = preflight(spec.build_schedule())
        if verdict is not None:
            return verdict
    _validate_model(spec)
    return Launch(spec, folder).start(timeout_s).wait(progress)


def _validate_model(spec: RunSpec) -> None:
    """Build and split the model first, so a bad ``--model`` is one InputError, not N dead ranks.

    A built-in model whose options prove it builds is only split, by its layer count (no
    torch in the launcher: 2 s before the first rank starts); other built-in options are
    built here; a user's function only in a child process (it may exit, crash or hang: see
    :mod:`.model_check`).
    """
    stages = spec.build_schedule().num_stages
    if spec.model.name not in BUILTIN_MODELS:
        from explorer.pipeline.runtime.model_check import check_user_model

        check_user_model(spec.to_json()["model"], stages, spec.microbatch_size, spec.seed)
        return
    from explorer.pipeline.runtime.model_shape import builtin_layers, split

    layers = builtin_layers(spec.model.name, spec.model.options)
    if layers is not None:
        split(range(layers), stages, spec.model.cuts)
        return
    from explorer.pipeline.runtime.models import build_model

    build_model(spec.model, stages, spec.microbatch_size, spec.seed)


__all__ = ["Progress", "preflight", "PipelineEngine", "Launch", "run_pipeline"]
