"""What a run left behind, read back from its folder: losses, checks, records, and the failure.

Reading the folder (rather than asking the processes) is what lets a failed run keep
everything: a rank killed by SIGKILL cannot report, but every step it finished is on disk.
It also serves ``torchrun`` runs, whose ranks the launcher never saw.

A read of another micro-batch's data (recorded by the ranks as ``hazard`` lines) fails the run
even when nothing crashed: the engine would have trained on the wrong data without a word.

The failure is the *cause*, not the first symptom. When one rank fails, its neighbours fail a
moment later (their peer is gone, or their receive times out); so a rank's own fault
(``buffer``, ``error``) wins over a rank killed from outside, which wins over a stall, which
wins over a lost peer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Optional

from explorer.failure import Failure, FailureKind, signal_name
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.folder import launcher_running
from explorer.pipeline.traces.follow import Follower, failure_kind, failure_of, rank_states
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.trace import chrome_trace, table, to_measured
from explorer.processes.ranks import holds_open, process_alive, process_state

_OWN_FAULT = ("buffer", "error")
#: Endings a rank's own work caused: a run interrupted after one of them still ended of it.
_OWN_ENDINGS = (FailureKind.BUFFER, FailureKind.ERROR, FailureKind.HAZARD, FailureKind.CONTRACT)


@dataclass
class PipelineRunResult:
    """One run of the explorer's pipeline engine; :meth:`to_dict` is the CLI's JSON contract.

    PyTorch's engine on the same schedule gives a :class:`~explorer.pipeline.runtime.torch_engine.
    TorchRunResult`; the simulator's walk is an :class:`~explorer.pipeline.analysis.reference.SimulatedRun`.
    """

    ok: bool
    losses: list[float]
    bitwise_equal_to_reference: Optional[bool]
    failure: Optional[Failure]
    records: list[dict]
    folder: Optional[Path] = None
    digest: Optional[str] = None
    launched: bool = True
    returncodes: dict[int, Optional[int]] = field(default_factory=dict)
    pids: dict[int, int] = field(default_factory=dict)
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        # The keys exactly; the run's id is on every instruction record ("run").
        return {
            "ok": self.ok,
            "losses": self.losses,
            "bitwise_equal_to_reference": self.bitwise_equal_to_reference,
            "failure": self.failure.to_dict() if self.failure else None,
            "instructions": self.records,
            # every P2P message that did not match its pair (explorer.pipeline.analysis.contract)
            "contract": self.details.get("contract", []),
            # a run ended by a stall: the doctor's verdict on it (explorer doctor's JSON)
            **({"hang": self.details["hang"]} if "hang" in self.details else {}),
        }

    def trace(self, iteration: Optional[int] = None) -> MeasuredTrace:
        """Measured instructions (the last iteration by default, all with ``iteration=-1``)."""
        every = to_measured(self.records, source=str(self.folder or "run"))
        trace = every if iteration == -1 else every.of_iteration(iteration)
        return replace(trace, stopped=self.stopped_ranks()) if self.failure else trace

    def stopped_ranks(self) -> tuple[int, ...]:
        """Ranks that ended before finishing their work: they failed, or wrote no ``done`` line
        (killed, stopped), by the one definition every view uses
        (:func:`~explorer.pipeline.traces.follow.rank_states`, the run being over)."""
        states = self.rank_states()
        return tuple(r for r in sorted(states) if states[r] in ("failed", "stopped"))

    def rank_states(self) -> dict[int, str]:
        """Each rank's final state (done, failed or stopped): the run is over."""
        failed = {int(e["rank"]) for e in self.details.get("failures", [])}
        done = set(self.details.get("finished", ()))
        own = {
            r: "failed" if r in failed else "done" if r in done else "running"
            for r in set(self.returncodes) | failed | done
        }
        return dict(rank_states(own, job_ended=True))

    def chrome_trace(self) -> dict:
        return chrome_trace(self.records, self.failure)

    def write_chrome_trace(self, path: Path) -> Path:
        Path(path).write_text(json.dumps(self.chrome_trace()))
        return Path(path)

    def loss_warning(self) -> Optional[str]:
        """One line when some losses were NaN or infinite (written as null), else None.

        The schedule may still be right (bitwise equal to a reference that diverged the same
        way), so the verdict stands; what diverged is the model or its data, and the user is
        told rather than shown a clean "ok" over a row of nulls."""
        final = self.details.get("result") or {}
        bad = final.get("nonfinite_losses") or sum(x is None for x in self.losses)
        if not bad:
            return None
        return (
            f"warning: {bad} loss(es) not finite (NaN or infinity, written as null): the model "
            "or its data diverged; check the inputs and the learning rate"
        )

    def table(self) -> str:
        return table(self.records)

    def same_as(self, other: "PipelineRunResult") -> bool:
        """Bitwise identical losses and gradients (equal digests of every bit)."""
        return self.digest is not None and self.digest == other.digest


def refused(message: str, where: Optional[dict] = None) -> PipelineRunResult:
    """A run the analysis stopped before launch (a deadlock, an unmatched exchange)."""
    failure = Failure(FailureKind.REFUSED, f"refused before launch: {message}", **(where or {}))
    return PipelineRunResult(False, [], None, failure, [], launched=False)


def collect(
    folder: Path,
    schedule: Schedule,
    returncodes: Optional[Mapping[int, Optional[int]]] = None,
    stopped: frozenset[int] = frozenset(),
    stall_timeout_s: Optional[float] = None,
    run_id: Optional[str] = None,
    frozen: frozenset[int] = frozenset(),
) -> PipelineRunResult:
    """Read a finished (or abandoned) run folder; ``stopped`` are ranks the launcher had to kill,
    ``frozen`` those it found stopped by a signal (the cause, when no rank failed first).

    With ``run_id`` only that run's lines and result count (a folder never mixes two runs).
    Without ``returncodes`` (``run --collect``), the exit codes the launcher saved in
    ``exit_codes.json`` are used, so a collected folder reaches the verdict the live run did.
    """
    follower = Follower(Path(folder), run_id or None)
    follower.poll()
    result_path = Path(folder) / "result.json"
    final = json.loads(result_path.read_text()) if result_path.exists() else None
    foreign = bool(run_id and final is not None and final.get("run") != run_id)
    if foreign:
        final = None  # another run's result: not this run's
    launcher, interrupted = None, None
    if returncodes is None:
        saved = read_exit_codes(folder, run_id)
        interrupted = saved.get("interrupted")
        returncodes, stopped = saved["returncodes"], frozenset(saved["stopped"]) | stopped
        frozen = frozenset(saved["frozen"]) | frozen
        stall_timeout_s = (
            stall_timeout_s if stall_timeout_s is not None else saved.get("stall_timeout_s")
        )
        if not returncodes and run_id:  # no exit codes yet: has the run ended at all?
            launcher = launcher_running(Path(folder), run_id)
        if not returncodes:  # no launcher named a stopped rank: their processes may say it
            frozen |= _stopped_by_signal(follower)
    failure = _diagnose(follower, schedule, dict(returncodes), stopped, stall_timeout_s, frozen)
    if launcher is not None and _still_going(follower, schedule):
        failure = _running(follower, schedule, launcher)  # its silent ranks are not failures yet
    if interrupted and (failure is None or failure.kind not in _OWN_ENDINGS):
        failure = _interrupted(follower, schedule, interrupted, failure)
    if failure is None and final is None:  # nothing was compared: no verdict on the result
        failure = Failure(
            FailureKind.UNFINISHED,
            "the folder holds no result of this run ("
            + ("result.json is another run's" if foreign else "no result.json")
            + "): nothing was compared with the reference",
        )
    ok = final is not None and failure is None  # a hazard line makes a finished run fail too
    pids = {r: p.pid for r, p in follower.ranks.items() if p.pid}
    return PipelineRunResult(
        ok=ok,
        losses=final["losses"] if final else [],
        bitwise_equal_to_reference=final["bitwise_equal_to_reference"] if final else None,
        failure=failure,
        records=follower.records,
        folder=Path(folder),
        digest=final["digest"] if final else None,
        returncodes=dict(returncodes),
        pids=pids,
        details={
            "run_id": run_id or None,
            "result": final,
            "failures": [e for e in follower.events if e["type"] == "failure"],
            "hazards": [e for e in follower.events if e["type"] == "hazard"],
            # timed instructions a rank could not read back (a GPU that failed): said, not hidden
            "lost": [e for e in follower.events if e["type"] == "lost"],
            "iterations": [e for e in follower.events if e["type"] == "iteration"],
            "finished": sorted(_finished(follower)),
            "teardown_exit_codes": {
                r: c
                for r, c in returncodes.items()
                if c not in (0, None) and r in _finished(follower)
            },
        },
    )


EXIT_CODES = "exit_codes.json"


def write_exit_codes(
    folder: Path,
    run_id: str,
    returncodes: Mapping[int, Optional[int]],
    stopped: frozenset[int],
    stall_timeout_s: Optional[float],
    frozen: frozenset[int] = frozenset(),
    interrupted: Optional[str] = None,
) -> None:
    """Keep how every rank ended in the folder, so ``run --collect`` names the same failure
    later; ``interrupted``: the signal that cut the launcher's watch short (``SIGINT``...)."""
    doc = {
        "run": run_id,
        "returncodes": {str(r): c for r, c in returncodes.items()},
        "stopped": sorted(stopped),
        "frozen": sorted(frozen),
        "stall_timeout_s": stall_timeout_s,
        **({"interrupted": interrupted} if interrupted else {}),
    }
    tmp = Path(folder) / (EXIT_CODES + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(Path(folder) / EXIT_CODES)


def read_exit_codes(folder: Path, run_id: Optional[str]) -> dict:
    """The exit codes saved for ``run_id`` (none when absent, unreadable or another run's)."""
    empty: dict = {"returncodes": {}, "stopped": [], "frozen": []}
    path = Path(folder) / EXIT_CODES
    if not path.is_file():  # absent, or a FIFO or folder put there: opening a FIFO blocks
        return empty
    try:
        doc = json.loads(path.read_text())
        if not isinstance(doc, dict) or (run_id and doc.get("run") != run_id):
            return empty
        codes = {int(r): (None if c is None else int(c)) for r, c in doc["returncodes"].items()}
        return {
            "returncodes": codes,
            "stopped": [int(r) for r in doc["stopped"]],
            "frozen": [int(r) for r in doc.get("frozen") or []],
            "stall_timeout_s": doc.get("stall_timeout_s"),
            # a signal's name: an edited file's long text is not carried into every verdict
            "interrupted": str(doc["interrupted"])[:32] if doc.get("interrupted") else None,
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return empty


def _diagnose(
    follower: Follower,
    schedule: Schedule,
    codes: dict,
    stopped: frozenset[int],
    stall_timeout_s: Optional[float],
    frozen: frozenset[int] = frozenset(),
) -> Optional[Failure]:
    failures = {e["rank"]: e for e in follower.events if e["type"] == "failure"}
    hazards = [e for e in follower.events if e["type"] == "hazard"]
    own = sorted(
        [e for e in failures.values() if failure_kind(e) in _OWN_FAULT] + hazards,
        key=lambda e: e["time"],
    )
    if own:
        later = [e for e in own[1:] if e["type"] == "failure"]
        then = f" (then: {later[0]['message']})" if later else ""
        return _entry(own[0], own[0]["message"] + then, failures)
    if frozen:
        return _frozen(follower, schedule, min(frozen), failures)
    # A rank that recorded "done" had finished its work and handed in its results; a non-zero
    # code after that comes from tearing down (gloo's threads at interpreter exit) and is kept
    # in ``details["teardown_exit_codes"]``, not blamed on the run.
    finished = _finished(follower)
    killed = [
        r
        for r, c in sorted(codes.items())
        if c is not None and c < 0 and r not in stopped and r not in failures and r not in finished
    ]
    if killed:
        rank = killed[0]
        where = _next_instruction(follower, schedule, rank)
        name = signal_name(codes[rank])
        return Failure(
            FailureKind.KILLED,
            f"rank {rank} was killed by {name} before {where['instruction']} at step {where['step']}; "
            f"the run was stopped and its trace up to there kept",
            returncode=codes[rank],
            signal=name,
            consequences=_consequences(failures, rank),
            **where,
        )
    timeouts = [e for e in failures.values() if failure_kind(e) == "timeout"]
    if timeouts:
        # A rank that reached its blocking exchange later (a busy machine) may see its
        # neighbour's process end before its own timeout: it waited there all the same.
        cut_off = [
            e for e in failures.values() if failure_kind(e) == "peer" and e.get("step") is not None
        ]
        waits = "; ".join(
            f"stage {e['stage']} (rank {e['rank']}) waited in {e['instruction']} at step {e['step']}"
            + (" until its neighbour's process ended" if failure_kind(e) == "peer" else "")
            for e in sorted(timeouts + cut_off, key=lambda e: e["rank"])
        )
        silent = [r for r in sorted(set(stopped) | set(codes)) if r not in failures]
        silent = [r for r in silent if r in stopped or (r not in finished and codes.get(r))]
        tail = "".join(
            f"; rank {r} made no progress after step "
            f"{follower.ranks[r].last_step if r in follower.ranks else -1} and "
            + ("was stopped" if r in stopped else f"exited with code {codes[r]} without a report")
            for r in silent
        )
        limit = f" more than {stall_timeout_s:g} s" if stall_timeout_s else ""
        return _entry(
            timeouts[0],
            f"stalled:{limit}: {waits}{tail}".replace("stalled::", "stalled:"),
            failures,
        )
    if failures and all(failure_kind(e) == "peer" for e in failures.values()):
        gone = _gone_first(follower, schedule, codes, set(stopped) | finished | set(failures))
        if gone is not None:  # a lost peer is a consequence: the rank that went is the cause
            return _gone(follower, schedule, gone, codes.get(gone), failures)
    if failures:
        first = min(failures.values(), key=lambda e: e["time"])
        return _entry(first, first["message"], failures)
    exited = [
        r
        for r, c in sorted(codes.items())
        if c not in (0, None) and r not in stopped and r not in finished
    ]
    if exited:
        where = _next_instruction(follower, schedule, exited[0])
        code = codes[exited[0]]
        return Failure(
            FailureKind.EXIT,
            f"rank {exited[0]} exited with code {code} (see rank{exited[0]}.log)",
            returncode=code,
            signal=signal_name(code),
            **where,
        )
    if codes and any(c is None for c in codes.values()):
        return Failure(FailureKind.UNFINISHED, "the run did not finish")
    unended = sorted(r for r in stopped if r not in finished)
    if unended:  # the launcher ended ranks that had neither finished nor said why they stopped
        rank = unended[0]
        where = _next_instruction(follower, schedule, rank)
        return Failure(
            FailureKind.UNFINISHED,
            f"the launcher stopped rank{'s' if len(unended) > 1 else ''} "
            f"{', '.join(map(str, unended))} before {'they' if len(unended) > 1 else 'it'} "
            f"finished or wrote a failure (no report within the run's limits); rank {rank} "
            + (
                f"was before {where['instruction']} at step {where['step']}"
                if where["instruction"]
                else "had run its last instruction"
            ),
            **where,
        )
    silent = [r for r in range(schedule.num_ranks) if r not in finished]
    if silent and not codes and all(r in follower.ranks for r in range(schedule.num_ranks)):
        return _ended_from_outside(follower, schedule, silent)
    if silent:  # it exited 0 without its end, or (read back) its file lost it
        rank = silent[0]
        where = _next_instruction(follower, schedule, rank)
        return Failure(
            FailureKind.UNFINISHED,
            f"rank {rank} has no record of finishing this run in the folder (rank{rank}.jsonl "
            "missing, empty, cut short or another run's): the folder does not hold the whole run",
            **where,
        )
    return None


def _ended_from_outside(follower: Follower, schedule: Schedule, silent: list[int]) -> Failure:
    """Every rank started and wrote lines, none wrote an end or a failure, and no launcher kept
    how they ended: the job was ended from outside all at once. Its launcher killed outright is
    the common case (each rank ends with its launcher), and the generic "no record of
    finishing" sentence sent the user looking for a cut file instead."""
    rank = silent[0]
    where = _next_instruction(follower, schedule, rank)
    at = _where_it_stopped(follower, rank, where)
    ranks = f"ranks {', '.join(map(str, silent))}" if len(silent) > 1 else f"rank {rank}"
    return Failure(
        FailureKind.UNFINISHED,
        f"{ranks} ended without a word and no launcher kept how ({EXIT_CODES} holds no exit "
        "code of this run): the "
        "job was ended from outside (its launcher killed, which ends its ranks; the OOM killer; "
        f"the machine going down), or the rank files were cut short; rank {rank} was {at}",
        **where,
    )


def _where_it_stopped(follower: Follower, rank: int, where: dict) -> str:
    """ "before X at step S" for a silent rank (``where`` from :func:`_next_instruction`), or,
    when it had finished every instruction of an iteration, after which one."""
    if where["instruction"]:
        return f"before {where['instruction']} at step {where['step']}"
    done = [x["iteration"] for x in follower.records if x["rank"] == rank]
    return f"after the last instruction of iteration {max(done, default=0)} (step {where['step']})"


def _gone_first(
    follower: Follower, schedule: Schedule, codes: Mapping[int, Optional[int]], ended: set[int]
) -> Optional[int]:
    """Of the ranks that ended without a word (no end, no failure, not stopped by the launcher),
    the one whose last line is the earliest: it went first. With exit codes known, only a rank
    that exited non-zero counts; with none kept (the launcher is gone), any silent rank does.
    None: there is none, and the lost peer stays the only thing known."""
    silent = [
        r
        for r in range(schedule.num_ranks)
        if r not in ended and (codes.get(r) not in (0, None) if codes else True)
    ]
    last = {
        r: max((x["end"] for x in follower.records if x["rank"] == r), default=0.0) for r in silent
    }
    return min(silent, key=lambda r: (last[r], r)) if silent else None


def _gone(
    follower: Follower,
    schedule: Schedule,
    rank: int,
    code: Optional[int],
    failures: Mapping[int, dict],
) -> Failure:
    """A rank that ended without a report while its neighbours lost it: the cause (the doctor
    names the same rank as gone). Without an exit code (the launcher that would have kept it is
    gone too) how it ended is not known, and the message says so."""
    where = _next_instruction(follower, schedule, rank)
    before = _where_it_stopped(follower, rank, where)
    if code is None:
        how = (
            "ended without a report, and no exit code is known (its launcher kept none: "
            "killed, or stopped, itself?)"
        )
    else:
        how = f"exited with code {code} without a report (see rank{rank}.log)"
    return Failure(
        FailureKind.UNFINISHED if code is None else FailureKind.EXIT,
        f"rank {rank} {how} {before}; the ranks that waited on it lost their peer",
        returncode=code,
        consequences=_consequences(failures, rank),
        **where,
    )


def _interrupted(
    follower: Follower, schedule: Schedule, signal: str, before: Optional[Failure]
) -> Optional[Failure]:
    """A run whose launcher was interrupted (Ctrl-C, SIGTERM) and ended its ranks: that is the
    cause, and what the ranks wrote as they were ended (a lost peer) its consequence; ``before``
    (the verdict without it) when every rank had finished first."""
    finished = _finished(follower)
    unended = [r for r in range(schedule.num_ranks) if r not in finished]
    if not unended:
        return before
    where = _next_instruction(follower, schedule, unended[0])
    at = f" before {where['instruction']} at step {where['step']}" if where["instruction"] else ""
    return Failure(
        FailureKind.UNFINISHED,
        f"the run was interrupted ({signal} to its launcher), which ended rank"
        f"{'s' if len(unended) > 1 else ''} {', '.join(map(str, unended))}; rank {unended[0]} "
        f"was{at or ' at its end'}: its trace up to there is kept",
        consequences=_consequences(
            {e["rank"]: e for e in follower.events if e["type"] == "failure"}, None
        ),
        **where,
    )


def _stopped_by_signal(follower: Follower) -> frozenset[int]:
    """Ranks with no end written whose process stands stopped by a signal (state T), as the
    doctor reads them: with no launcher left to name them, a run read back blamed the rank
    that waited on one where the doctor named the stopped one."""
    return frozenset(
        r
        for r, prog in follower.ranks.items()
        if prog.pid is not None
        and prog.state not in ("done", "failed")
        and process_state(prog.pid) == "T"
        # a copy of a live run names the original's processes: not this folder's ranks
        and holds_open(prog.pid, Path(follower.folder) / f"{follower.prefix}{r}.jsonl") is not False
    )


def _still_going(follower: Follower, schedule: Schedule) -> bool:
    """Whether the run goes on, as its ranks' lines and processes say (its launcher holds the
    folder): no failure or hazard written yet, and some rank with no end whose process is alive
    or has not written its start line (it is starting). A launcher stopped by a signal still
    holds the lock after its ranks ended: their ends, or their processes gone, say so."""
    if any(e["type"] in ("failure", "hazard") for e in follower.events):
        return False
    for rank in range(schedule.num_ranks):
        prog = follower.ranks.get(rank)
        if prog is None or prog.pid is None:
            return True
        if prog.state not in ("done", "failed") and process_alive(prog.pid):
            return True
    return False


def _running(follower: Follower, schedule: Schedule, launcher: int) -> Failure:
    """A folder read while its run goes on: where each rank is, and no verdict yet."""
    said = []
    for rank in range(schedule.num_ranks):
        prog = follower.ranks.get(rank)
        if prog is None or prog.last_step < 0:
            said.append(f"rank {rank} starting")
        elif prog.state == "done":
            said.append(f"rank {rank} done")
        else:
            said.append(f"rank {rank} at iteration {prog.iteration} step {prog.last_step}")
    shown = "; ".join(said[:8]) + (f"; and {len(said) - 8} more ranks" if len(said) > 8 else "")
    return Failure(
        FailureKind.RUNNING,
        f"the run is still running (its launcher, pid {launcher}, holds run.lock): {shown}. "
        "No verdict before it ends: read the folder again then, or see where each rank waits "
        "now with explorer doctor",
    )


def _frozen(
    follower: Follower, schedule: Schedule, rank: int, failures: Mapping[int, dict]
) -> Failure:
    """A rank whose process stood stopped by a signal: it will never move by itself, and every
    wait of the others is its consequence."""
    where = _next_instruction(follower, schedule, rank)
    return Failure(
        FailureKind.KILLED,
        f"rank {rank} was stopped by a signal (SIGSTOP, SIGTSTP or Ctrl-Z: its process stood in "
        f"state T) before {where['instruction']} at step {where['step']}; the run was ended and "
        "its trace up to there kept",
        signal="SIGSTOP",
        consequences=_consequences(failures, rank),
        **where,
    )


def _finished(follower: Follower) -> set[int]:
    return {e["rank"] for e in follower.events if e["type"] == "done"}


def _consequences(failures: Mapping[int, dict], cause_rank: Optional[int]) -> tuple[str, ...]:
    """What the other ranks reported after the cause, in the order they reported it."""
    others = sorted(
        (e for r, e in failures.items() if r != cause_rank), key=lambda e: e.get("time", 0.0)
    )
    return tuple(f"rank {e['rank']}: {e['message']}" for e in others)


def _entry(event: dict, message: str, failures: Mapping[int, dict]) -> Failure:
    """The failure of ``event`` (a rank's failure or hazard line) told as ``message``."""
    if event["type"] == "failure":
        base = failure_of(event)
    else:
        base = Failure(FailureKind.HAZARD, event["message"])
    return Failure(
        kind=base.kind,
        message=message,
        rank=event["rank"],
        stage=event.get("stage"),
        step=event.get("step"),
        instruction=event.get("instruction"),
        exception_type=base.exception_type,
        traceback_tail=base.traceback_tail,
        consequences=_consequences(failures, event["rank"]),
    )


def _next_instruction(follower: Follower, schedule: Schedule, rank: int) -> dict:
    """Where a silent rank stopped: the instruction after the last one it recorded."""
    done = [r for r in follower.records if r["rank"] == rank]
    it = max((r["iteration"] for r in done), default=0)
    count = sum(1 for r in done if r["iteration"] == it)
    for step, instrs in enumerate(schedule.stream(rank)):
        for ins in instrs:
            if count == 0:
                return {
                    "rank": rank,
                    "stage": ins.stage,
                    "step": step,
                    "instruction": ins.deepspeed_repr(),
                }
            count -= 1
    stage = schedule.stages_of_rank(rank)[0]
    return {"rank": rank, "stage": stage, "step": schedule.num_steps - 1, "instruction": None}


__all__ = [
    "PipelineRunResult",
    "refused",
    "collect",
    "EXIT_CODES",
    "write_exit_codes",
    "read_exit_codes",
]
