"""Tail a run folder while the job runs: new trace lines, per-rank progress, the trace so far.

Works for any run folder the runtime writes - spawned from the notebook or started by
``torchrun`` on this machine - because the ranks only ever append whole lines to their own
``rank<R>.jsonl``. A line without its newline yet is left for the next poll.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Mapping, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt
from explorer.failure import Failure
from explorer.pipeline.traces.messages import message_problem
from explorer.pipeline.traces.records import MeasuredTrace
from explorer.pipeline.traces.trace import to_measured

#: Where a rank is, as its lines tell: no line yet, instructions coming, finished, failed.
FollowerState = Literal["starting", "running", "done", "failed"]
#: Where a rank is, as every view says it (:func:`rank_state`): its lines, plus ``stopped``.
RankState = Literal["starting", "running", "done", "failed", "stopped"]
#: The states of a rank that will write nothing more.
ENDED_STATES = ("done", "failed", "stopped")
#: A state in words where the word alone would not say why (every report and view uses these).
STATE_WORDS = {"stopped": "stopped (no end written: killed, or the job ended)"}


@dataclass
class RankProgress:
    """What one rank has reported so far."""

    rank: int
    steps_done: int = 0  # steps of the current iteration with at least one instruction recorded
    last_step: int = -1
    iteration: int = -1
    #: What its own lines say; :meth:`Follower.progress` gives the state every view uses.
    state: RankState = "starting"
    pid: Optional[int] = None
    failure: Optional[Failure] = None


#: Fields an instruction line must carry, and their types (times are finite seconds).
_INSTR_INTS = ("iteration", "stage", "step")
_INSTR_TIMES = ("start", "end")


def parse_record(line: str, where: str) -> dict:
    """One trace line as the ranks write it, or an InputError (one line) saying what is wrong.

    The ranks write whole JSON objects with an integer ``rank`` and a ``type``; an instruction
    line also has integer ``iteration``/``stage``/``step`` and finite ``start``/``end``. A line
    that is none of this was edited or damaged: naming it beats a KeyError deep in a figure,
    and a number like ``1e400`` (read as infinity) never reaches a bubble or a critical path.
    """

    def refuse(what: str) -> InputError:
        return InputError(f"{where} {what}: {excerpt(line)}; was the file edited or damaged?")

    record = inputs.loads_json(line, where)  # strict (no NaN), depth-capped: one line on error
    rank = record.get("rank") if isinstance(record, dict) else None
    if (
        not isinstance(record, dict)
        or isinstance(rank, bool)
        or not isinstance(rank, int)
        or not 0 <= rank < 2**31
        or not isinstance(record.get("type"), str)
    ):
        raise refuse(
            "is not a record the ranks write (a JSON object with an integer 'rank' and a 'type')"
        )
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise refuse(f"has {key}={value!r} (every number the ranks write is finite)")
    if record["type"] == "instr":
        if not _has_ints(record) or not all(
            isinstance(record.get(k), (int, float)) for k in _INSTR_TIMES
        ):
            raise refuse("is an instruction line without integer iteration, stage, step and times")
        problem = message_problem(record)
        if problem is not None:
            raise refuse(problem)
    if record["type"] == "message":  # PyTorch's engine: one exchange's tuple, untimed
        if not _has_ints(record) or not isinstance(record.get("text"), str) or "p2p" not in record:
            raise refuse(
                "is a message line without integer iteration, stage, step, its text and its p2p tuple"
            )
        problem = message_problem(record)
        if problem is not None:
            raise refuse(problem)
    return record


def _has_ints(record: dict) -> bool:
    """Integer (not bool) iteration, stage and step, as every placed line has."""
    return all(
        isinstance(record.get(k), int) and not isinstance(record.get(k), bool) for k in _INSTR_INTS
    )


def rank_state(own: str, *, peer_failed: bool, job_ended: bool) -> RankState:
    """A rank's state, the one definition the progress bars, the breakdown, the grid's words and
    ``explorer read`` all use.

    ``own`` is what the rank's own lines say (:data:`FollowerState`). A rank that wrote no end
    (no ``done``, no ``failure``) is ``stopped``, not running, once another rank has failed (a
    pipeline cannot go on without a stage; the launcher tears it down, often by SIGKILL, which
    leaves no line) or once the job has ended (the launcher exited, or whoever started the job
    said so). Silence alone is not an end: a rank between two instructions writes nothing.
    """
    if own in ("done", "failed"):
        return own
    if peer_failed or job_ended:
        return "stopped"
    return "starting" if own == "starting" else "running"


def rank_states(own: Mapping[int, str], *, job_ended: bool = False) -> dict[int, RankState]:
    """:func:`rank_state` of every rank, from each rank's own state (rank -> ``FollowerState``)."""
    failed = {r for r, s in own.items() if s == "failed"}
    return {
        r: rank_state(s, peer_failed=bool(failed - {r}), job_ended=job_ended)
        for r, s in own.items()
    }


def job_state(states: Mapping[int, str]) -> str:
    """The job in one word from its ranks' states: running (some rank may still write),
    finished (every rank done), failed (a rank failed), stopped (ended with no failure written)."""
    if not states or any(s not in ENDED_STATES for s in states.values()):
        return "running"
    if any(s == "failed" for s in states.values()):
        return "failed"
    return "stopped" if any(s == "stopped" for s in states.values()) else "finished"


def ranks_in(states: Mapping[int, str], state: str) -> list[int]:
    """The ranks in ``state``, in rank order."""
    return sorted(r for r, s in states.items() if s == state)


def failure_kind(line: dict) -> Optional[str]:
    """The kind of a rank's ``failure`` line (folders written before the record said ``cause``)."""
    return line.get("kind") or line.get("cause")


def failure_of(line: dict) -> Failure:
    """The :class:`Failure` a rank's ``failure`` line carries."""
    return Failure.from_dict({**line, "kind": failure_kind(line)})


@dataclass
class Follower:
    """Incremental reader of a run folder (see the module docstring)."""

    folder: Path
    #: Only lines of this run are read (None: every line, for folders written before run ids).
    run_id: Optional[str] = None
    #: Whose files: ``rank`` (explorer's engine) or ``torch_rank`` (PyTorch's).
    prefix: str = "rank"
    records: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    #: Each rank's progress as its own lines say it (see :meth:`progress` for its state).
    ranks: dict[int, RankProgress] = field(default_factory=dict)
    #: Whoever started the job says it is over (the launcher exited, or the run was collected):
    #: a rank that wrote no end is then ``stopped`` (see :func:`rank_state`).
    job_ended: bool = False
    _offsets: dict[Path, int] = field(default_factory=dict)
    _lines: dict[Path, int] = field(default_factory=dict)

    def poll(self) -> list[dict]:
        """Read every complete new line; returns the new instruction records."""
        new: list[dict] = []
        for path in sorted(Path(self.folder).glob(f"{self.prefix}*.jsonl")):
            with open(path, "rb") as fh:
                fh.seek(self._offsets.get(path, 0))
                chunk = fh.read()
            end = chunk.rfind(b"\n") + 1
            self._offsets[path] = self._offsets.get(path, 0) + end
            for line in chunk[:end].decode("utf-8", errors="replace").splitlines():
                self._lines[path] = self._lines.get(path, 0) + 1
                if line.strip():
                    record = parse_record(line, f"{path.name} line {self._lines[path]}")
                    if self.run_id is None or record.get("run") == self.run_id:
                        self._take(record, new)
        self.records.extend(new)
        return new

    def _take(self, line: dict, new: list[dict]) -> None:
        rank = int(line["rank"])
        prog = self.ranks.setdefault(rank, RankProgress(rank))
        kind = line.get("type")
        if kind == "instr":
            line.pop("type", None)
            new.append(line)
            if line["iteration"] != prog.iteration:
                prog.iteration, prog.steps_done = line["iteration"], 0
            if line["step"] != prog.last_step or prog.steps_done == 0:
                prog.steps_done += 1
            prog.last_step, prog.state = line["step"], "running"
            return
        self.events.append(line)
        if kind == "start":
            prog.pid, prog.state = line.get("pid"), "running"
        elif kind == "failure":
            prog.state, prog.failure = "failed", failure_of(line)
        elif kind == "done":
            prog.state = "done"

    def states(self) -> dict[int, RankState]:
        """Each rank's state by :func:`rank_state` (the lines so far, and :attr:`job_ended`)."""
        return rank_states({r: p.state for r, p in self.ranks.items()}, job_ended=self.job_ended)

    def progress(self) -> list[RankProgress]:
        """Each rank's progress in rank order, its ``state`` by :func:`rank_state` (copies)."""
        states = self.states()
        return [replace(self.ranks[r], state=states[r]) for r in sorted(self.ranks)]

    def trace(self, iteration: Optional[int] = None) -> MeasuredTrace:
        """The instructions measured so far (of one iteration when given), in seconds."""
        rows = [r for r in self.records if iteration is None or r["iteration"] == iteration]
        return to_measured(rows, source=str(self.folder))


__all__ = [
    "parse_record",
    "FollowerState",
    "RankState",
    "ENDED_STATES",
    "STATE_WORDS",
    "RankProgress",
    "rank_state",
    "rank_states",
    "job_state",
    "ranks_in",
    "Follower",
    "failure_kind",
    "failure_of",
]
