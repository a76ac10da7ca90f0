"""A ``TORCH_TRACE`` folder of thousands of ranks, read on every core into folded compile stories.

:func:`~explorer.compile.analysis.from_trace.read_job` keeps every rank's records as Python
objects and says where ranks differ rank by rank: right for the 2 to 8 ranks of a probe or a
small job, unreadable and slow at 4,096. Here each rank's log (and its profiler trace, where
one is paired) is read once, in a worker process of the base's pool, reduced there to a
:class:`~explorer.compile.analysis.story.RankStory`, and folded in this process as it comes
back: memory is one story per group of like ranks plus a rank number and a compile time per
rank. A Ctrl-C keeps the ranks read and says which were not.

A rank that cannot be read does not stop the job; each is an :class:`Unread` the report names:

* no log for a rank below the highest one (the highest rank bounds the job: a missing last
  rank cannot be seen, TORCH_TRACE writes no world size);
* a log that cannot be opened, is empty, or holds no structured-trace record (not a log);
* a log whose records name another rank than its file name (renamed, or of another job);
* a log cut short: its records before the cut are read and folded, and the rank is named;
* two logs for one rank: two runs wrote into the folder (TORCH_TRACE makes a new file per
  process, so a rerun adds a second log per rank). Which one is this job's cannot be told from
  the logs, so neither is read and the rank is named; when every other rank or more has two,
  the folder is two runs and is refused (exit 2), as a small folder's twins are, since any
  answer would mix them.

A profiler trace is paired with a rank by the process id ``tensorboard_trace_handler`` writes
in its name (``host_<pid>.<n>.pt.trace.json``), checked against the rank it names inside: the
small reader's pairing (by the pid inside, read from every trace first) would read every
profiler trace twice, and pids repeat across hosts. Pure python.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from explorer.compile.analysis.fold import StoryGroup, add, regroup
from explorer.compile.analysis.from_trace import rank_result
from explorer.compile.analysis.story import RankStory, story_of
from explorer.compile.traces.detect import profile_files, trace_files
from explorer.compile.traces.profile import read_compile_profile
from explorer.compile.traces.torch_trace import rank_in_name, read_torch_trace
from explorer.errors import InputError, excerpt
from explorer.processes.pool import Progress, in_order

#: A folder of more structured traces than this is read here and folded; up to this many the
#: small reader's rank-by-rank report stays (it is exact and short at that size).
FOLD_AT = 8
#: Below this many bytes of logs (and this many ranks) a job is read in this process: starting
#: workers (each imports the reader) costs more than it saves.
PARALLEL_BYTES, PARALLEL_RANKS = 64 << 20, 2048
_PID_IN_NAME = re.compile(r"_(\d+)\.\d+\.pt\.trace\.json(?:\.gz)?$")


@dataclass(frozen=True)
class Unread:
    """A rank the job should have and that could not be read in full: why, and what was kept."""

    rank: int
    why: str
    kept: int = 0

    def sentence(self) -> str:
        kept = f" (its {self.kept} compiles before that are read)" if self.kept else ""
        return f"{self.why}{kept}"


@dataclass
class CompileJob:
    """A job's ranks folded by compile story, and what could not be read (see the module docstring)."""

    path: Path
    #: The highest rank with a log, plus one.
    ranks: int
    groups: list[StoryGroup]
    unread: list[Unread]
    interrupted: bool = False
    workers: int = 1
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def read(self) -> int:
        """Ranks whose story is folded."""
        return sum(len(g.ranks) for g in self.groups)

    @property
    def majority(self) -> StoryGroup:
        return self.groups[0]


#: One rank read: its story (None: nothing usable) and what was wrong with it.
RankRead = tuple[int, Optional[RankStory], Optional[Unread]]


@dataclass(frozen=True)
class _How:
    """What reading one rank needs besides its log: the profiler traces by the pid in their name
    (picklable, sent once to each worker)."""

    profiles: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def read(self, item: tuple[int, str]) -> RankRead:
        rank, path = item
        try:
            story, why = _read_rank(Path(path), rank, dict(self.profiles))
        except InputError as exc:  # a profiler trace that cannot be read: the log alone
            story, why = None, str(exc)
        if story is None:
            return rank, None, Unread(rank, why or "nothing in it could be read")
        return rank, story, Unread(rank, why, len(story.compiles)) if why else None


def _read_rank(
    path: Path, rank: int, profiles: dict[int, tuple[str, ...]]
) -> tuple[Optional[RankStory], Optional[str]]:
    try:
        if path.stat().st_size == 0:
            return None, "its log is empty"
        trace = read_torch_trace(path)
    except OSError as exc:
        return None, f"its log cannot be read ({exc.strerror})"
    except InputError as exc:
        return None, "its log cannot be read" if "cannot be read" in str(
            exc
        ) else "its log holds no structured-trace record"
    if trace.said_rank is not None and trace.said_rank != rank:
        return None, "its log's records name another rank (a renamed log, or another job's?)"
    pid = trace.pid
    mine = [
        p
        for f in (profiles.get(pid, ()) if pid is not None else ())
        for p in read_compile_profile(f)
        if p.pid == pid and p.rank in (None, rank)
    ]
    result = rank_result(trace, mine, f"rank {rank}")
    why = (
        "its log ends in a cut line (the job was stopped while writing?)"
        if trace.truncated
        else None
    )
    return story_of(rank, result), why


def _profiles(path: Path) -> tuple[dict[int, tuple[str, ...]], list[str]]:
    """The profiler traces beside the logs by the pid in their name, and those without one."""
    by_pid: dict[int, list[str]] = {}
    unnamed = []
    for f in profile_files(path):
        m = _PID_IN_NAME.search(f.name)
        if m:
            by_pid.setdefault(int(m.group(1)), []).append(str(f))
        else:
            unnamed.append(f.name)
    return {k: tuple(v) for k, v in by_pid.items()}, unnamed


def _by_rank(files: Sequence[Path], path: Path) -> tuple[dict[int, Path], list[Unread], list[str]]:
    """One log per rank; ranks with two (named), and logs that name no rank (their names)."""
    found: dict[int, list[Path]] = {}
    nameless = []
    for f in files:
        rank = rank_in_name(f.name)
        if rank is None:
            nameless.append(f.name)
        else:
            found.setdefault(rank, []).append(f)
    twins = {r: fs for r, fs in found.items() if len(fs) > 1}
    if twins and 2 * len(twins) >= len(found):
        r = min(twins)
        raise InputError(
            f"{excerpt(str(path))} holds two or more structured traces for {len(twins)} of its "
            f"{len(found)} ranks (rank {r}: {', '.join(f.name for f in twins[r][:3])}): two runs in "
            "one folder; move the older one aside (TORCH_TRACE appends a new file per run)"
        )
    unread = [
        Unread(
            r,
            "two logs or more (two runs wrote here): which is this job's cannot be told, so "
            "neither is read",
        )
        for r, fs in sorted(twins.items())
    ]
    return {r: fs[0] for r, fs in found.items() if r not in twins}, unread, nameless


#: The most ranks without a log named one by one; past it (a stray log of a far bigger job names a
#: rank in the millions) the gap is one entry.
MOST_MISSING = 100_000


def _missing(top: int, present: set[int]) -> list[Unread]:
    """The ranks below ``top`` without a log (one entry for all when there are too many)."""
    count = top - len(present)
    if count <= MOST_MISSING:
        return [Unread(r, "no log") for r in range(top) if r not in present]
    first = next(r for r in range(top) if r not in present)
    return [
        Unread(
            first,
            f"no log, nor for {count - 1} more ranks up to {top - 1} (a stray log of a bigger job?)",
        )
    ]


def workers_for(files: Sequence[Path], workers: Optional[int] = None) -> int:
    """``workers`` when given, else every core for a job large enough to pay for them."""
    if workers is not None:
        return max(1, workers)
    size = sum(f.stat().st_size for f in files if f.exists())
    big = size >= PARALLEL_BYTES or len(files) >= PARALLEL_RANKS
    return (os.cpu_count() or 1) if big else 1


def read_folded(
    path: Path, progress: Optional[Progress] = None, workers: Optional[int] = None
) -> CompileJob:
    """Every rank's log in ``path``, folded by story; Ctrl-C keeps what was read."""
    t0 = time.perf_counter()
    files = trace_files(path)
    if not files:
        raise InputError(
            f"{excerpt(str(path))} holds no dedicated_log_torch_trace_*.log: run the job with TORCH_TRACE=DIR"
        )
    logs, unread, nameless = _by_rank(files, path)
    by_pid, unnamed = _profiles(path)
    top = max([*logs, *(u.rank for u in unread)], default=-1) + 1
    unread += _missing(top, set(logs) | {u.rank for u in unread})
    items = sorted((r, str(f)) for r, f in logs.items())
    n = workers_for(list(logs.values()), workers)
    how = _How(tuple(sorted(by_pid.items())))
    groups: dict = {}
    done, interrupted = 0, False
    results = in_order(how.read, items, n)
    try:
        for _, story, problem in results:
            if story is not None:
                add(groups, story, True)
            if problem is not None:
                unread.append(problem)
            done += 1
            if progress is not None:
                progress(done, len(items))
    except KeyboardInterrupt:
        interrupted = True
        unread += [Unread(r, "not read (interrupted)") for r, _ in items[done:]]
    finally:
        results.close()
    stories = [g.story for g in groups.values()]
    every = bool(stories) and all(s.profiled for s in stories)
    folded = regroup(groups.values(), every)
    if not folded:
        raise InputError(
            f"no rank of {excerpt(str(path))} could be read ("
            + "; ".join(f"rank {u.rank}: {u.why}" for u in unread[:3])
            + "): point explorer read at a TORCH_TRACE=DIR folder"
        )
    job = CompileJob(Path(path), top, folded, sorted(unread, key=lambda u: u.rank), interrupted, n)
    job.notes = _notes(job, nameless, unnamed, by_pid)
    job.seconds = time.perf_counter() - t0
    return job


def _notes(job: CompileJob, nameless: list[str], unnamed: list[str], by_pid: dict) -> list[str]:
    notes = [n for n in job.majority.story.notes if "ends in a cut line" not in n]
    if nameless:
        notes.append(
            f"{len(nameless)} log(s) name no rank ({', '.join(nameless[:3])}): written before "
            "init_process_group, so not read as any rank's."
        )
    if unnamed:
        notes.append(
            f"{len(unnamed)} profiler trace(s) do not carry a process id in their name "
            f"({', '.join(unnamed[:3])}; tensorboard_trace_handler writes host_<pid>.<n>.pt.trace.json): "
            "at this many ranks they are not paired with a rank."
        )
    profiled = sum(len(g.ranks) for g in job.groups if g.story.profiled)
    if by_pid and 0 < profiled < job.read:
        notes.append(
            f"{profiled} of {job.read} ranks were profiled: iterations and each rank's verdict are "
            "compared only when every rank was, so ranks are folded by their compiles alone."
        )
    return notes


__all__ = [
    "FOLD_AT",
    "PARALLEL_BYTES",
    "PARALLEL_RANKS",
    "CompileJob",
    "RankRead",
    "Unread",
    "read_folded",
    "workers_for",
]
