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
from explorer.pipeline.traces.follow import Follower, failure_kind, failure_of, rank_states
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.trace import chrome_trace, table, to_measured

_OWN_FAULT = ("buffer", "error")


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
    if returncodes is None:
        saved = read_exit_codes(folder, run_id)
        returncodes, stopped = saved["returncodes"], frozenset(saved["stopped"]) | stopped
        frozen = frozenset(saved["frozen"]) | frozen
        stall_timeout_s = (
            stall_timeout_s if stall_timeout_s is not None else saved.get("stall_timeout_s")
        )
    failure = _diagnose(follower, schedule, dict(returncodes), stopped, stall_timeout_s, frozen)
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
) -> None:
    """Keep how every rank ended in the folder, so ``run --collect`` names the same failure later."""
    doc = {
        "run": run_id,
        "returncodes": {str(r): c for r, c in returncodes.items()},
        "stopped": sorted(stopped),
        "frozen": sorted(frozen),
        "stall_timeout_s": stall_timeout_s,
    }
    tmp = Path(folder) / (EXIT_CODES + ".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.replace(Path(folder) / EXIT_CODES)


def read_exit_codes(folder: Path, run_id: Optional[str]) -> dict:
    """The exit codes saved for ``run_id`` (none when absent, unreadable or another run's)."""
    empty: dict = {"returncodes": {}, "stopped": [], "frozen": []}
    path = Path(folder) / EXIT_CODES
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
        cut_off = [e for e in failures.values() if failure_kind(e) == "peer" and "step" in e]
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
