"""Follow a user's DeepSpeed job live: ``JobFollower(folder).start()`` in a notebook.

The folder is the one the job's ``explorer.instrument(engine, folder)`` writes. Each poll reads
what the ranks appended (:class:`~explorer.pipeline.traces.instrumented.InstrumentedRun`); when
something new arrived it redraws the per-rank progress, the overlay of the current iteration's
measured instructions on the simulation of the schedule the ranks ran, and the grid, with the
failure pinned on its cell the moment a rank reports it. Every message the ranks described is
checked against its pair (:mod:`explorer.pipeline.analysis.contract`) at each redraw: the first
violation is said in the status line and pinned on the grid (it is the cause; a failure that
follows it is its consequence). Every redraw is kept in ``history``
(time, iteration, records, failure cell), which is how a test proves the view moved while
the job was still running.

Every panel says a rank's state by one definition
(:func:`~explorer.pipeline.traces.follow.rank_state`): a rank that wrote no end is ``stopped``,
not running, once another rank failed or the job ended. The job has ended when its launcher
(``job=``, the ``torchrun`` process) has exited, or when :meth:`stop` is called; without
``job=``, when the processes of the ranks that wrote no end are gone from this machine. Whether the
launcher ended is asked *before* the lines are read, so a poll that sees it ended has read every
line the job wrote: the final picture is the same whether the follower polled just before the
teardown or long after.

A job that stops moving is said so: when no rank has written a line for the stall time
(:mod:`explorer.pipeline.traces.stall`: ``stall_after_s``, else five times the longest silence
the job already had, at least 10 s) the status says "stalled for 42 s" instead of "running".
The hang is then diagnosed by :func:`~explorer.pipeline.runtime.doctor.doctor` on the job's
process tree (``job=``, a ``Popen`` or a PID; without it, the ranks' PIDs their start lines
name), once per stall by itself (``auto_diagnose``) and whenever the "diagnose" button is
pressed; the verdict is said in the status line and pinned on the grid
(:func:`~explorer.pipeline.views.live.verdict_grid`) until the job moves again. A verdict a job
passes through rather than stays in (:data:`UNSETTLED`: a rank still on its way into its wait
when the stacks were read, a log that grew meanwhile, ranks still starting) is diagnosed again
by itself, a stall time later, up to :data:`AUTO_RETRIES` times while the job stays silent, and
:meth:`JobFollower.wait_for_diagnosis` waits for that one: on a busy machine the first look can
come a moment early, and a notebook that prints the first verdict would teach the wrong one.

The polling runs in a daemon thread (:meth:`start`) or by hand (:meth:`poll`); an exception in
a poll is said in the status line and stops the thread, never the kernel.
"""

from __future__ import annotations

import html
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import ipywidgets as w

from explorer.pipeline.analysis import check
from explorer.pipeline.analysis.contract import ContractViolation, check_contract, describe
from explorer.pipeline.analysis.measured import measured_vs_simulated
from explorer.pipeline.runtime.doctor import Diagnosis, doctor
from explorer.pipeline.traces.follow import STATE_WORDS, job_state, ranks_in
from explorer.pipeline.traces.instrumented import InstrumentedRun, is_instrumented
from explorer.pipeline.traces.stall import StallWatch, stall_words
from explorer.pipeline.views.live import failure_cell, pinned_grid, progress_figure, verdict_grid
from explorer.pipeline.views.overlay import overlay_figure
from explorer.pipeline.views.palette import HAZARD
from explorer.processes.ranks import process_alive
from explorer.ui.sync import LiveFigure

__all__ = ["AUTO_RETRIES", "UNSETTLED", "JobFollower"]

#: Verdicts that describe a moment, not a hang: looked at again while the job stays silent.
UNSETTLED = ("no-wait", "moving", "starting")
#: How many times a stall's unsettled verdict is diagnosed again by itself.
AUTO_RETRIES = 3


class JobFollower:
    """The live view of one traced job (see the module docstring)."""

    def __init__(
        self,
        folder: Union[str, Path],
        *,
        interval_s: float = 0.2,
        job: Any = None,
        stall_after_s: Optional[float] = None,
        auto_diagnose: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.folder = Path(folder)
        self.interval_s = interval_s
        #: The job's launcher (a ``subprocess.Popen`` of torchrun, anything with ``poll()`` and
        #: ``pid``, or a PID): once it has exited, no rank is running, whatever its lines say.
        self.job = job
        #: The stall rule (see the module docstring); ``clock`` is what it reads the time from.
        self.watch = StallWatch(stall_after_s)
        self.clock = clock
        self.auto_diagnose = auto_diagnose
        #: Seconds the job has been silent while stalled (None: not stalled).
        self.stalled_s: Optional[float] = None
        #: The latest diagnosis of a stall, and the one line said when it could not be made.
        self.diagnosis: Optional[Diagnosis] = None
        self.diagnosis_error = ""
        self._diagnosed_stall = -1  # the stall (progress count) the automatic diagnosis ran for
        self._diagnosed_at = -1  # the progress count of the latest diagnosis (said until it moves)
        self._auto_tries = 0  # this stall's automatic diagnoses after its first
        self._auto_at = 0.0  # when this stall's latest automatic diagnosis began (``clock``)
        self._diagnoses = 0  # diagnoses published so far: a waiter sees a new one come
        self._diagnosing = threading.Lock()
        #: Set when a diagnosis (or its error) is published, or when the following ends.
        self._diagnosed = threading.Event()
        self._failure: Optional[dict] = None
        #: The progress count when a verdict was pinned on the grid (None: none is pinned).
        self._verdict_pinned: Optional[int] = None
        self.run: Optional[InstrumentedRun] = None
        self.report = None
        #: Every message so far that broke the P2P contract, first one first.
        self.contract: list[ContractViolation] = []
        self.history: list[dict] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        #: :meth:`stop` was called: whoever started the job says it is over, so a rank that
        #: wrote no end (killed when a neighbour failed) is not shown as still running.
        self.stopped = False
        self._thread: Optional[threading.Thread] = None
        self._pinned: Optional[tuple[int, int]] = None
        self.status = w.HTML(f"waiting for {html.escape(str(self.folder))} …")
        self.progress = LiveFigure()
        self.overlay = LiveFigure()
        self.grid = LiveFigure()
        self.diagnose_button = w.Button(
            description="diagnose",
            tooltip="read every rank's stack now (explorer doctor) and pin the verdict on the grid",
        )
        self.diagnose_button.on_click(lambda _: self._diagnose_in_background())
        self.widget = w.VBox(
            [
                w.HBox([self.status, self.diagnose_button]),
                self.progress.widget,
                self.overlay.widget,
                self.grid.widget,
            ],
            layout=w.Layout(width="100%"),
        )

    # -- polling -----------------------------------------------------------------------------
    def poll(self) -> bool:
        """Read new lines; redraw what changed. True when the views were updated."""
        ended = self.launcher_ended()  # asked first: when it is over, the read has every line
        if self.run is None:
            if not is_instrumented(self.folder):
                return False
            self.run = InstrumentedRun.open(self.folder)
        follower = self.run.follower
        before = (len(follower.records), len(follower.events), follower.job_ended)
        self.run.poll()
        if ended:
            follower.job_ended = True
        elif self.job is None:  # no launcher to ask: the silent ranks' processes on this host
            self.run.end_if_gone(process_alive, socket.gethostname())
        if (len(follower.records), len(follower.events), follower.job_ended) == before:
            return self._check_stall()
        if (len(follower.records), len(follower.events)) != before[:2]:
            self.watch.progressed(self.clock())
            self._diagnosed.clear()  # the job moved: a diagnosis from before it is not awaited
        self.stalled_s = None
        self._redraw()
        return True

    def launcher_ended(self) -> bool:
        """The launcher (``job=``) has exited, or :meth:`stop` said the job is over."""
        if self.stopped or self.job is None:
            return self.stopped
        if isinstance(self.job, int):
            return not process_alive(self.job)
        return self.job.poll() is not None

    def pids(self) -> list[int]:
        """The job's process to diagnose (``job=``'s PID); none: the ranks' PIDs their start
        lines name are diagnosed (on this machine). None either once the job has ended: its
        processes are gone, and what the ranks wrote is what tells the story."""
        if self.launcher_ended():
            return []
        pid = self.job if isinstance(self.job, int) else getattr(self.job, "pid", None)
        return [pid] if isinstance(pid, int) else []

    # -- a job that stopped moving ---------------------------------------------------------------
    def _check_stall(self) -> bool:
        """Say the stall (and diagnose it once) when no rank wrote for the stall time."""
        run = self.run
        if run is None or run.finished or run.follower.job_ended or not self.history:
            return False
        if job_state({r["rank"]: r["state"] for r in self._ranks()}) != "running":
            return False  # a rank failed or every rank ended: the job is not silent, it is over
        stalled = self.watch.stalled_for(self.clock())
        if stalled is None:
            return False
        first = self.stalled_s is None
        self.stalled_s = stalled
        if self._auto_due():
            self.diagnose()
        else:
            self._say(self._ranks(), self._failure)
        if first:
            self.history.append({**self.history[-1], "time": time.time(), "stalled_s": stalled})
        return True

    def _auto_due(self) -> bool:
        """Diagnose by itself: at a stall's start, and again a stall time after the last look
        while its verdict is :data:`UNSETTLED` (at most :data:`AUTO_RETRIES` more times)."""
        if not self.auto_diagnose:
            return False
        now = self.clock()
        if self._diagnosed_stall != self.watch.progress_count:  # a new stall: its first look
            self._diagnosed_stall = self.watch.progress_count
            self._auto_tries, self._auto_at = 0, now
            return True
        if not self._retry_left() or now - self._auto_at < self.watch.threshold_s():
            return False
        self._auto_tries, self._auto_at = self._auto_tries + 1, now
        return True

    def _retry_left(self) -> bool:
        """The current stall's verdict is unsettled and the follower will look again."""
        current = self.diagnosis if self._diagnosed_at == self.watch.progress_count else None
        return (
            self.auto_diagnose
            and self._auto_tries < AUTO_RETRIES
            and current is not None
            and not self.diagnosis_error
            and current.verdict.verdict in UNSETTLED
        )

    def diagnose(self) -> Optional[Diagnosis]:
        """Diagnose the job now (:func:`~explorer.pipeline.runtime.doctor.doctor` on its process
        tree) and pin the verdict on the grid; None (and the reason said) where it cannot be.

        The verdict is pinned on the grid *before* it is published in :attr:`diagnosis`: another
        thread (a notebook cell waiting for it, :meth:`wait_for_diagnosis`) that sees the
        diagnosis also sees the grid that shows it, never the grid from before.
        """
        with self._diagnosing:
            schedule = self.report.schedule if self.report is not None else None
            diagnosis, error = self.diagnosis, ""
            try:
                diagnosis = doctor(self.pids(), self.folder, schedule=schedule)
            except Exception as exc:  # said in the status line: the follower goes on
                error = f"could not diagnose: {type(exc).__name__}: {exc}"
            if diagnosis is not None and not error and self.report is not None:
                self.grid.show(verdict_grid(self.report, diagnosis.verdict))
                self._verdict_pinned = self.watch.progress_count  # until the job moves again
            self.diagnosis, self.diagnosis_error = diagnosis, error
            self._diagnosed_at = self.watch.progress_count
            self._diagnoses += 1
            if self.run is not None:
                self._say(self._ranks(), self._failure)
            self._diagnosed.set()
        return None if error else diagnosis

    def wait_for_diagnosis(self, timeout_s: float) -> Optional[Diagnosis]:
        """Block until a diagnosis (or the reason there is none) is published, the following
        ends (the job is over: no stall will come), or ``timeout_s`` passes. The diagnosis of
        where the job stands now; None when there is none (not yet, it could not be made, or it
        was made before the job last moved). An :data:`UNSETTLED` verdict is returned only once
        the following thread will not look again. A cell that waits with this sees the grid
        already showing the verdict."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self._diagnosed.wait(max(0.0, deadline - time.monotonic())):
                return None
            if self.diagnosis_error:
                return None
            seen = self._diagnoses
            while self._diagnoses == seen and self._following() and self._retry_left():
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.05)
            if self._diagnoses == seen:
                return self.diagnosis if self._diagnosed_at == self.watch.progress_count else None

    def _following(self) -> bool:
        """The background thread polls (and so diagnoses again when one is due)."""
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def _diagnose_in_background(self) -> None:
        """The button: py-spy takes a second or two; the kernel is not held meanwhile."""
        threading.Thread(target=self.diagnose, name="explorer-diagnose", daemon=True).start()

    def _redraw(self) -> None:
        run = self.run
        assert run is not None
        if self.report is None:
            schedule = run.schedule()
            if schedule is not None:
                self.report = check(schedule, other_model=False)
        ranks = self._ranks()
        steps = self.report.schedule.num_steps if self.report is not None else 1
        self.progress.show(progress_figure(ranks, steps))
        iteration = max((r["iteration"] for r in ranks), default=-1)
        measured = run.follower.trace(iteration)
        failure = run.failure()
        if self.report is not None:
            self.contract = check_contract(self.report.schedule, run.follower.records)
            if self.contract:  # the cause: pinned before whatever failed after it
                failure = _as_failure(self.contract[0], self.report.schedule.stage_to_rank)
            ended = tuple(r["rank"] for r in ranks if r.get("state") in ("failed", "stopped"))
            trace = replace(measured, stopped=ended) if len(measured) else None
            self.overlay.show(overlay_figure(measured_vs_simulated(self.report, trace)))
            cell = failure_cell(failure)
            if self._verdict_pinned == self.watch.progress_count:
                pass  # the job has not moved since the diagnosis: its verdict stays pinned
            elif (
                not self.history
                or cell != self._pinned
                or self.history[-1]["finished"]
                or self._verdict_pinned is not None
            ):
                self.grid.show(pinned_grid(self.report, failure))
                self._pinned, self._verdict_pinned = cell, None
        self._failure = failure
        self._say(ranks, failure)
        self.history.append(
            {
                "time": time.time(),
                "iteration": iteration,
                "records": len(run.follower.records),
                "failure_cell": self._pinned,
                "finished": run.finished,
                "contract": len(self.contract),
                "states": {r["rank"]: r["state"] for r in ranks},
                "stalled_s": None,
            }
        )

    def _ranks(self) -> list[dict]:
        """Each rank's progress, its state by the one definition every panel uses."""
        assert self.run is not None
        return self.run.ranks()

    def _say(self, ranks: list[dict], failure: Optional[dict]) -> None:
        run = self.run
        assert run is not None
        words = job_words(ranks)
        if words == "running" and self.stalled_s is not None:
            words = stall_words(self.stalled_s)
        head = (
            f"DeepSpeed {run.version} job {run.run_id}: {len(ranks)} ranks, "
            f"{len(run.follower.records)} instructions ({words})"
        )
        lines = [html.escape(head)]
        if self.stalled_s is not None or self._diagnosed_at == self.watch.progress_count:
            lines.append(self._stall_line())
        if self.contract:
            lines.append(
                f"<span style='color:{HAZARD}'>{len(self.contract)} message(s) broke the P2P "
                f"contract; the first: {html.escape(describe(self.contract[0]))}</span>"
            )
            failure = run.failure()
        if failure:
            lines.append(
                f"<span style='color:{HAZARD}'>first failure: rank {failure['rank']}, stage "
                f"{failure['stage']}, step {failure['step']}, {html.escape(str(failure['instruction']))}: "
                f"{html.escape(str(failure['message']))}</span>"
            )
        self.status.value = "<br>".join(lines)

    def _stall_line(self) -> str:
        """The diagnosis of the stall in words (or why there is none yet)."""
        if self.diagnosis_error:
            said = self.diagnosis_error
        elif self.diagnosis is not None:
            said = f"diagnosis: {self.diagnosis.verdict.describe()}"
            if self.diagnosis.refused:
                said += f" ({self.diagnosis.refused})"
        else:
            said = "no rank wrote for a while; press diagnose"
        return f"<span style='color:{HAZARD}'>{html.escape(said)}</span>"

    # -- following in the background --------------------------------------------------------
    def start(self) -> "JobFollower":
        """Poll every ``interval_s`` in a daemon thread until every rank ended (or :meth:`stop`)."""
        self._stop.clear()
        self._diagnosed.clear()
        self._thread = threading.Thread(target=self._loop, name="explorer-follow", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        try:
            self._follow()
        finally:  # nothing more will be diagnosed by this thread: no one waits for it in vain
            self._diagnosed.set()

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # said in the status line; the kernel goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")
                self.status.value = f"<span style='color:{HAZARD}'>⚠ following stopped: {html.escape(self.errors[-1])}</span>"
                return
            if self.run is not None and (self.run.finished or self.run.follower.job_ended):
                return  # every line is read: nothing more will come
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop following (the job ended, or the user has seen enough): the views stop saying
        "running" about ranks that never wrote an end."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.stopped = True
        if self.run is not None:
            self.run.follower.job_ended = True
            if self.history:
                self._redraw()

    def _repr_mimebundle_(self, **kwargs: object) -> Optional[dict]:
        return self.widget._repr_mimebundle_(**kwargs)


def _as_failure(violation: ContractViolation, stage_to_rank: Sequence[int]) -> dict:
    """A contract violation in the shape of a failure record, to pin it on the grid."""
    return {
        "rank": stage_to_rank[violation.stage],
        "stage": violation.stage,
        "step": violation.step,
        "instruction": violation.instruction,
        "kind": "contract",
        "message": describe(violation),
    }


def job_words(ranks: Sequence[dict]) -> str:
    """The job's state in the status line, naming the ranks that failed and those that stopped."""
    states = {r["rank"]: r["state"] for r in ranks}
    state = job_state(states)
    if state in ("running", "finished"):
        return state
    said = [
        f"{_ranks_words(rs)} {what}"
        for rs, what in (
            (ranks_in(states, "failed"), "failed"),
            (ranks_in(states, "stopped"), STATE_WORDS["stopped"]),
        )
        if rs
    ]
    return f"{state}: {'; '.join(said)}"


def _ranks_words(ranks: Sequence[int]) -> str:
    return f"rank{'s' if len(ranks) > 1 else ''} {', '.join(str(r) for r in ranks)}"
