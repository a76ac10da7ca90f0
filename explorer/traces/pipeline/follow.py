"""Tail a run folder while the job runs: new trace lines, per-rank progress, the trace so far.

Works for any run folder the runtime writes - spawned from the notebook or started by
``torchrun`` on this machine - because the ranks only ever append whole lines to their own
``rank<R>.jsonl``. A line without its newline yet is left for the next poll.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt
from explorer.traces.failure import Failure
from explorer.traces.pipeline.trace import to_measured
from explorer.traces.records import MeasuredTrace

#: Where a rank is, as its lines tell: no line yet, instructions coming, finished, failed.
FollowerState = Literal["starting", "running", "done", "failed"]


@dataclass
class RankProgress:
    """What one rank has reported so far."""

    rank: int
    steps_done: int = 0  # steps of the current iteration with at least one instruction recorded
    last_step: int = -1
    iteration: int = -1
    state: FollowerState = "starting"
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
        if not all(
            isinstance(record.get(k), int) and not isinstance(record.get(k), bool)
            for k in _INSTR_INTS
        ) or not all(isinstance(record.get(k), (int, float)) for k in _INSTR_TIMES):
            raise refuse("is an instruction line without integer iteration, stage, step and times")
    return record


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
    ranks: dict[int, RankProgress] = field(default_factory=dict)
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

    def trace(self, iteration: Optional[int] = None) -> MeasuredTrace:
        """The instructions measured so far (of one iteration when given), in seconds."""
        rows = [r for r in self.records if iteration is None or r["iteration"] == iteration]
        return to_measured(rows, source=str(self.folder))


__all__ = [
    "parse_record",
    "FollowerState",
    "RankProgress",
    "Follower",
    "failure_kind",
    "failure_of",
]
