"""A folder ``explorer.instrument(engine, out_dir)`` wrote, read back while the job runs or after.

The ranks of a user's DeepSpeed job append ``rank<R>.jsonl`` in the explorer's line format
(see :mod:`explorer.pipeline.runtime.deepspeed.instrument`), so the same :class:`Follower` tails them.
On top, this module rebuilds the schedule each rank *ran* from its ``schedule`` lines (names and
``buffer_id`` as the engine got them; the k-th instruction of a kind serves micro-batch k, as
DeepSpeed's engine assumes), checks it with the explorer's analysis, and names the failure:
the first in time across ranks, the later ones its consequences.

A folder the job wrote into twice holds two runs' lines; every line names its run, and the
latest run (the last ``start`` line) is the one read, so a report never mixes two jobs.

Pure: no torch, no deepspeed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.instructions import KIND_BY_DEEPSPEED_NAME, Instruction, Kind
from explorer.pipeline.schedules.schedule import Schedule, from_streams
from explorer.pipeline.traces.follow import Follower, failure_kind, failure_of, job_state
from explorer.pipeline.traces.job_folder import start_lines

SOURCE = "deepspeed"


def is_instrumented(folder: Path) -> bool:
    """True when ``folder`` holds ``rank<R>.jsonl`` files whose first line is an instrument's ``start``."""
    folder = Path(folder)
    if not folder.is_dir() or (folder / "spec.json").exists():
        return False
    for path in sorted(folder.glob("rank*.jsonl"))[:4]:
        try:
            with open(path, "rb") as fh:
                first = fh.readline(65536)
            line = json.loads(first)
        except (OSError, ValueError):
            continue
        if isinstance(line, dict) and line.get("type") == "start" and line.get("source") == SOURCE:
            return True
    return False


def latest_run(folder: Path) -> Optional[str]:
    """The run id of the last ``start`` line in the folder (the newest job), or None."""
    best: tuple[float, str] | None = None
    for path in Path(folder).glob("rank*.jsonl"):
        for line in start_lines(path):
            if line.get("source") == SOURCE:
                key = (float(line.get("unix", 0.0)), str(line.get("run")))
                best = key if best is None or key > best else best
    return best[1] if best else None


@dataclass
class InstrumentedRun:
    """What the folder says about one job so far (see the module docstring)."""

    folder: Path
    run_id: Optional[str]
    follower: Follower
    schedules: dict[int, dict] = field(default_factory=dict)  # rank -> latest ``schedule`` line

    @staticmethod
    def open(folder: Path) -> "InstrumentedRun":
        folder = Path(folder)
        if not is_instrumented(folder):
            raise InputError(
                f"{excerpt(str(folder))} holds no trace of explorer.instrument(engine, out_dir): "
                "expected rank<R>.jsonl files starting with a DeepSpeed 'start' line"
            )
        run = InstrumentedRun(folder, latest_run(folder), Follower(folder, None))
        run.follower.run_id = run.run_id
        return run

    def poll(self) -> list[dict]:
        """Read what the ranks appended since the last poll; returns the new instruction records."""
        seen = len(self.follower.events)
        new = self.follower.poll()
        for e in self.follower.events[seen:]:
            if e.get("type") == "schedule":
                self.schedules[int(e["rank"])] = e
        return new

    # --- what is known -------------------------------------------------------------------
    @property
    def starts(self) -> list[dict]:
        return [e for e in self.follower.events if e.get("type") == "start"]

    @property
    def version(self) -> Optional[str]:
        return next((e.get("deepspeed_version") for e in self.starts), None)

    @property
    def num_stages(self) -> int:
        return max((int(e.get("num_stages", 1)) for e in self.starts), default=0)

    def schedule(self) -> Optional[Schedule]:
        """The schedule the ranks ran, once every stage has written its ``schedule`` line."""
        stages = self.num_stages
        by_stage = {int(e["stage"]): e for e in self.schedules.values()}
        if not stages or sorted(by_stage) != list(range(stages)):
            return None
        streams, buffers, micro = [], [], 0
        for stage in range(stages):
            line = by_stage[stage]
            counters: dict[Kind, int] = {}
            rows = []
            for row in line["steps"]:
                out = []
                for name, buffer in row:
                    kind = KIND_BY_DEEPSPEED_NAME.get(name)
                    if kind is None:
                        raise InputError(
                            f"stage {stage} ran an instruction the explorer does not know: {excerpt(name)}"
                        )
                    mb = -1
                    if kind.has_microbatch:
                        mb = counters.get(kind, 0)
                        counters[kind] = mb + 1
                        micro = max(micro, mb + 1)
                    out.append(Instruction(stage, kind, mb, int(buffer)))
                rows.append(out)
            streams.append(rows)
            buffers.append(int(line.get("buffers") or 1))
        return from_streams(
            streams,
            num_microbatches=micro,
            stage_to_rank=list(range(stages)),
            buffers=buffers,
            name="DeepSpeed engine (as run)",
            params={"kind": "deepspeed-run", "p2p": "blocking"},
        )

    def failures(self) -> list[dict]:
        return sorted(
            (e for e in self.follower.events if e.get("type") == "failure"),
            key=lambda e: e.get("time", 0.0),
        )

    def failure(self) -> Optional[dict]:
        """The cause: the first failure in time that is not a lost peer, the others its consequences.

        The :class:`~explorer.failure.Failure` record as a dict (``to_dict``), plus the
        ``time`` the rank reported it (wall clock).
        """
        found = self.failures()
        if not found:
            return None
        causes = [e for e in found if failure_kind(e) != "peer"] or found
        first = causes[0]
        record = replace(
            failure_of(first),
            rank=first.get("rank"),
            consequences=tuple(
                f"rank {e['rank']} (+{e.get('time', 0.0) - first.get('time', 0.0):.3f} s): "
                f"{e.get('message')}"
                for e in found
                if e is not first
            ),
        )
        return {**record.to_dict(), "iteration": first.get("iteration"), "time": first.get("time")}

    def ranks(self) -> list[dict]:
        """Per rank: stage, pid, state, iteration and step reached.

        The state is :func:`~explorer.pipeline.traces.follow.rank_state`'s: a rank that wrote no
        end is ``stopped`` once another rank failed (torchrun killed it) or the job ended.
        """
        stage_of = {int(e["rank"]): e.get("stages", [None])[0] for e in self.starts}
        return [
            {
                "rank": p.rank,
                "stage": stage_of.get(p.rank),
                "pid": p.pid,
                "state": p.state,
                "iteration": p.iteration,
                "last_step": p.last_step,
            }
            for p in self.follower.progress()
        ]

    @property
    def state(self) -> str:
        """The job in one word (:func:`~explorer.pipeline.traces.follow.job_state`)."""
        return job_state(self.follower.states())

    def silent_ranks_gone(self, alive: Callable[[int], bool], host: str) -> bool:
        """Every rank that wrote no end ran on ``host`` and its process is gone (``alive(pid)``
        false): the job ended though no line said so (killed with its launcher).

        False when it cannot be known: no silent rank, fewer ranks than stages started, a
        rank on another machine, or a folder whose ``start`` lines name no host.
        """
        silent = [r for r, p in self.follower.ranks.items() if p.state not in ("done", "failed")]
        if not silent or len(self.follower.ranks) < self.num_stages:
            return False
        where = {int(e["rank"]): (e.get("host"), e.get("pid")) for e in self.starts}
        for rank in silent:
            on, pid = where.get(rank, (None, None))
            if on != host or isinstance(pid, bool) or not isinstance(pid, int) or alive(pid):
                return False
        return True

    def end_if_gone(self, alive: Callable[[int], bool], host: str) -> bool:
        """Mark the job ended (:attr:`Follower.job_ended`) when :meth:`silent_ranks_gone`; the
        lines written before the processes ended are read first, so nothing is missed."""
        if not self.follower.job_ended and self.silent_ranks_gone(alive, host):
            self.poll()
            self.follower.job_ended = True
        return self.follower.job_ended

    @property
    def finished(self) -> bool:
        """Every rank that started has written ``done`` or a failure."""
        ranks = self.follower.ranks
        return bool(ranks) and all(p.state in ("done", "failed") for p in ranks.values())


def read_instrumented(folder: Path) -> InstrumentedRun:
    """Open ``folder`` and read everything the ranks wrote so far."""
    run = InstrumentedRun.open(folder)
    run.poll()
    return run


__all__ = ["InstrumentedRun", "SOURCE", "is_instrumented", "latest_run", "read_instrumented"]
