"""``explorer doctor``: why a running job stopped moving, in the schedule's words, without touching it.

The target is the launcher's PID (``torchrun``, DeepSpeed's launcher, ``explorer run``, any
script that starts the ranks) or the ranks' own PIDs. Its process tree is walked for the
processes with ``RANK`` in their environment (:mod:`explorer.processes.stacks`); each rank's
live stack is read with py-spy and turned into a :class:`~explorer.pipeline.analysis.hang.RankState`
(:mod:`explorer.pipeline.analysis.stacks`), placed in the schedule where the run folder holds
one (``spec.json``, found from the ranks' command lines or given), and the verdict is
:func:`~explorer.pipeline.analysis.hang.diagnose`'s.

What the job wrote itself fills the gaps: a rank whose process is gone, or whose stack could
not be read, is described from its ``rank<R>.jsonl`` (the last step it finished, when it last
wrote). "Since" is the time since a rank last wrote a line there. Nothing is sent to the job:
no signal, no file, no pause (py-spy's non-blocking mode).
"""

from __future__ import annotations

import json
import linecache
import os
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping, Optional, Sequence, Union, cast

from explorer.errors import InputError
from explorer.pipeline.analysis.collectives import diagnose_dumps
from explorer.pipeline.analysis.departure import Departure, departures
from explorer.pipeline.analysis.hang import (
    HangVerdict,
    RankState,
    diagnose,
    first_row_of_step,
    locate,
    peer_stage,
    placed,
)
from explorer.pipeline.analysis.stacks import (
    CONTEXT_LINES,
    Activity,
    StackReading,
    frames_from_pyspy,
    main_thread,
    read_stack,
)
from explorer.pipeline.analysis.torch_stacks import stages_seen, torch_peer, torch_words
from explorer.pipeline.schedules.instructions import parse_instruction
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.traces.flight_recorder import is_flight_folder, read_dumps
from explorer.pipeline.traces.folder import of_torch_engine
from explorer.pipeline.traces.stack_folder import (
    SAVED_MARK,
    SavedStack,
    StackFolder,
    clear_saved,
    read_stack_folder,
    save_stack,
)
from explorer.processes.ranks import holds_open, process_state
from explorer.processes.stacks import PTRACE_FIX, Dump, Proc, dump_all, read_proc, tree


@dataclass(frozen=True)
class RankProcess:
    """A rank of the job: its number, its process (None: not found), the folder it writes to."""

    rank: int
    pid: Optional[int]
    proc: Optional[Proc]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive


@dataclass(frozen=True)
class Diagnosis:
    """The verdict with how it was reached: the folder read, the refusal (if any), the time it took."""

    verdict: HangVerdict
    folder: Optional[Path]
    refused: str  # one line when attaching was refused ("" otherwise)
    seconds: float
    live: int = 0  # ranks whose stack was read
    #: "job" (its processes and run folder), "flight-recorder" (dumps) or "stacks" (left as files)
    source: str = "job"
    #: Where each rank's recorded order left the plan, first in time first (None: no plan, or
    #: no rank recorded its instructions; empty: every rank kept to it).
    departures: Optional[tuple[Departure, ...]] = None
    #: Rank files of another run in the folder (``rank<R>.jsonl`` -> its run), left unread.
    foreign: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {
            **self.verdict.to_dict(),
            "folder": None if self.folder is None else str(self.folder),
            "refused": self.refused or None,
            "seconds": round(self.seconds, 3),
            "live_stacks": self.live,
            "source": self.source,
            "left_the_plan": None
            if self.departures is None
            else [d.to_dict() for d in self.departures],
            "other_runs": [{"file": f, "run": r} for f, r in self.foreign],
        }


def doctor(
    pids: Sequence[int],
    folder: Optional[Path] = None,
    schedule: Optional[Schedule] = None,
    plan: Optional[Schedule] = None,
    save: Optional[Path] = None,
) -> Diagnosis:
    """Diagnose the job at ``pids`` (a launcher, or its ranks); ``folder``: where the ranks write;
    ``schedule``: the one the ranks run, where the folder holds no ``spec.json`` (a user's job
    traced by ``explorer.instrument`` writes its schedule as lines, read by the follower);
    ``plan``: the one they should run, to name where a rank's recorded order left it (default:
    the schedule the ranks run).

    A folder of Flight Recorder dumps (no ``rank<R>.jsonl``) is read after the fact: the first
    collective where the ranks' records differ (:mod:`explorer.pipeline.analysis.collectives`).
    A folder of stacks the job left (``save``'s, py-spy's, the tracebacks in its logs:
    :mod:`explorer.pipeline.traces.stack_folder`) is read as the live stacks would be.
    ``save``: write each live rank's stack there, to be read again when the job is gone.
    """
    t0 = time.monotonic()
    if not pids and folder is not None and not any(Path(folder).glob("rank*.jsonl")):
        if is_flight_folder(Path(folder)):
            verdict = diagnose_dumps(read_dumps(Path(folder)))
            return Diagnosis(verdict, Path(folder), "", time.monotonic() - t0, 0, "flight-recorder")
        saved = _stacks_in(Path(folder))
        if saved is not None:
            return _from_saved(saved, t0, schedule)
    ranks = find_ranks(pids, folder) if pids else ranks_in_folder(folder)
    folder = folder or _folder_of(ranks)
    run_id = ""
    if schedule is None:
        schedule, model, run_id = _schedule(folder)
    else:
        model = str(schedule.params.get("p2p", "blocking"))
    foreign = _other_runs(folder, run_id) if folder else {}
    if not pids:  # found from the folder: a foreign file's pid is another job's process
        ranks = [r for r in ranks if f"rank{r.rank}.jsonl" not in foreign]
    written = _ranks_written(folder, ranks) if folder else []
    logs = {r: _read_log(folder, r) for r in written if f"rank{r}.jsonl" not in foreign}
    ranks = _fill_from_logs(ranks, logs)
    if schedule is not None:  # a rank that left no trace at all is still a rank of the job
        known = {r.rank for r in ranks}
        ranks += [RankProcess(r, None, None) for r in range(schedule.num_ranks) if r not in known]
        ranks.sort(key=lambda r: r.rank)
    live = [(r.pid, r.proc) for r in ranks if r.alive and r.pid is not None and r.proc]
    dumps = dump_all([pid for pid, _ in live])
    # each rank's state as found (before its stack was read) and now (after)
    proc_states = {pid: state_at_stack(proc.state, process_state(pid)) for pid, proc in live}
    # The watch for movement starts once the stacks are taken: a rank that wrote its last step
    # and then reached a deadlock while the stacks were read had not moved since they showed it
    # waiting (read before them, that last write made a real cycle "moving").
    sizes, sized_at = _log_sizes(folder, logs), time.monotonic()
    threads = {r.rank: _thread(r, dumps) for r in ranks if r.alive}
    readings = {rank: _read(t) if isinstance(t, dict) else t for rank, t in threads.items()}
    seen_at = stages_seen(readings)
    states = [
        _staged(
            _state(r, readings.get(r.rank), logs.get(r.rank), schedule, seen_at, proc_states),
            schedule,
        )
        for r in ranks
    ]
    refused = next((d.refused for d in dumps.values() if d.refused == PTRACE_FIX), "")
    verdict = diagnose(states, model)
    live = sum(1 for s in states if s.source == "stack")
    if live and verdict.verdict in ("cycle", "waits-on") and _moved(folder, sizes, sized_at):
        verdict = HangVerdict("moving", verdict.ranks, unseen=verdict.unseen)
    elif _starting(folder, run_id, logs, states):
        states = [
            replace(s, activity="starting", note="") if _not_started(s, logs) else s for s in states
        ]
        verdict = HangVerdict("starting", tuple(states), unseen=verdict.unseen)
    ran = [x for log in logs.values() for x in log.get("ran", ()) if x.get("text")]
    if plan is not None:
        _plan_fits(plan, schedule, {r.rank for r in ranks})
    plan = plan if plan is not None else schedule
    left = tuple(departures(plan, ran)) if plan is not None and ran else None
    if save is not None:
        _save(save, ranks, threads, states, logs, folder, proc_states)
    return Diagnosis(
        verdict,
        folder,
        refused,
        time.monotonic() - t0,
        live,
        departures=left,
        foreign=tuple(sorted(foreign.items())),
    )


#: How long a live job's rank files are watched before a wait its stacks show is called a hang:
#: a stack is one moment, and a moving job passes through waits (two ranks in recv under the
#: batched model, a rank in a barrier) many times a second. A job that hangs writes nothing.
#: Counted from the sizes' first reading, just after the stacks, and long enough for a busy
#: machine: at a load of 7 on 2 cores a moving job once wrote nothing in the second after it,
#: and was called hung.
CONFIRM_S = 2.0
#: How often the sizes are read again while they are watched.
_RELOOK_S = 0.1


def _not_started(state: RankState, logs: dict[int, dict]) -> bool:
    """A rank with neither a process seen nor a start line written."""
    return state.activity == "gone" and "pid" not in logs.get(state.rank, {})


def _launched_here(folder: Path) -> bool:
    """Whether the launcher of the run ``spec.json`` names still runs (``run.lock``)."""
    from explorer.pipeline.traces.folder import launcher_running

    try:
        run_id = json.loads((folder / "spec.json").read_text(encoding="utf-8")).get("run_id")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(run_id, str) and launcher_running(folder, run_id) is not None


def _starting(
    folder: Optional[Path], run_id: str, logs: dict[int, dict], states: Sequence[RankState]
) -> bool:
    """Ranks with no start line yet while their launcher runs: the job is starting (its ranks
    import torch for seconds before they write), not gone. Doctor once said every rank of a
    starting job was gone, exit 1."""
    silent = [s for s in states if _not_started(s, logs)]
    if not silent or folder is None or not run_id:
        return False
    from explorer.pipeline.traces.folder import launcher_running

    return launcher_running(Path(folder), run_id) is not None


def _log_sizes(folder: Optional[Path], ranks: Iterable[int]) -> dict[int, int]:
    """Each rank file's size now (the ranks append a line per instruction they finish)."""
    out = {}
    for rank in ranks:
        try:
            out[rank] = (Path(folder or ".") / f"rank{rank}.jsonl").stat().st_size
        except OSError:
            continue
    return out


def _moved(folder: Optional[Path], sizes: dict[int, int], since: float) -> bool:
    """Whether any rank wrote progress within :data:`CONFIRM_S` of reading ``sizes`` (at
    ``since``), looked at again every :data:`_RELOOK_S` (a moving job answers at once).

    Growth that is only a ``failure``, ``hazard`` or ``lost`` line is no progress: a waiting
    rank whose stall timeout fires writes its failure, and the hang was once called "moving"."""
    if folder is None or not sizes:
        return False
    while True:
        now = _log_sizes(folder, sizes)
        if any(_progress_in(folder, r, sizes[r], now[r]) for r in now if now[r] != sizes[r]):
            return True
        if time.monotonic() - since >= CONFIRM_S:
            return False
        time.sleep(_RELOOK_S)


#: Lines a rank writes that say it stopped or lost something, not that it went on.
_NOT_PROGRESS = frozenset({"failure", "hazard", "lost"})
#: Growth larger than this is progress without reading it (no failure is that long).
_READ_AT_MOST = 1 << 16
_LINE_TYPE = re.compile(rb'"type":\s*"(\w+)"')


def _progress_in(folder: Path, rank: int, before: int, after: int) -> bool:
    """Whether what rank ``rank`` appended to its file between sizes ``before`` and ``after``
    holds a line of progress (an instruction, an iteration, a start or an end). A file that
    shrank was rewritten (a new run in the folder): that is movement too."""
    if after < before or after - before > _READ_AT_MOST:
        return True
    try:
        with open(Path(folder) / f"rank{rank}.jsonl", "rb") as fh:
            fh.seek(before)
            grown = fh.read(after - before)
    except OSError:
        return True  # changed and unreadable: do not call it a hang
    for line in grown.splitlines():
        kind = _LINE_TYPE.search(line[:200])
        if kind is None or kind.group(1).decode() not in _NOT_PROGRESS:
            return True  # a line whose type cannot be read yet counts as progress
    return False


def _other_runs(folder: Path, run_id: str) -> dict[str, str]:
    """Rank files whose start lines name another run than ``spec.json``'s (``name -> run``):
    a rank file copied in, or left by an earlier run of more ranks. Their records are not this
    run's: read, they once made a clean verdict of a rank that never ran, or gave this run
    another run's failure."""
    from explorer.pipeline.traces.job_folder import start_lines

    if not run_id:
        return {}
    out = {}
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        runs = [x["run"] for x in start_lines(path) if isinstance(x.get("run"), str)]
        if runs and run_id not in runs:
            out[path.name] = runs[0]
    return out


def _stacks_in(folder: Path) -> Optional[StackFolder]:
    """The stacks ``folder`` holds, read once (no separate look first), or None when it holds
    none: the folder is then a run folder or nothing, and the caller says which."""
    try:
        return read_stack_folder(folder)
    except InputError:
        return None


#: A rank of the folder with no stack: what ended it printed none (torchrun's SIGTERM, a kill).
NO_STACK = "left no stack: a rank its launcher or a signal ended prints none"


def _from_saved(saved: StackFolder, t0: float, schedule: Optional[Schedule]) -> Diagnosis:
    """The verdict from the stacks a job left (saved dumps, the tracebacks it printed as it died).

    The same reading as live, rank by rank; a rank whose files hold no stack is one the verdict
    cannot see (a rank its launcher killed prints nothing). The schedule is the one a ``--save``
    copied beside the stacks (``spec.json``), where there is one.
    """
    if schedule is None:
        schedule, model, _ = _schedule(saved.folder)
    else:
        model = str(schedule.params.get("p2p", "blocking"))
    ranks = sorted(set(saved.ranks) | set(range(schedule.num_ranks if schedule else 0)))
    readings = {r: _read(s.thread) for r, s in saved.stacks.items() if s.thread is not None}
    seen_at = stages_seen(readings)
    states = []
    for rank in ranks:
        stack = saved.stacks.get(rank)
        if stack is None:
            states.append(RankState(rank, None, "unseen", source="none", note=NO_STACK))
        elif stack.thread is None:  # saved without a stack: said then as it is said now
            process = RankProcess(rank, stack.pid, None)
            activity, note = stack.said
            states.append(_from_log(process, stack.log, schedule, cast(Activity, activity), note))
        else:
            states.append(_saved_state(stack, readings[rank], schedule, seen_at))
    verdict = diagnose([_staged(s, schedule) for s in states], model)
    unread = f"could not read {', '.join(saved.unreadable)}" if saved.unreadable else ""
    return Diagnosis(verdict, saved.folder, unread, time.monotonic() - t0, 0, "stacks")


def _saved_state(
    stack: SavedStack,
    reading: StackReading,
    schedule: Optional[Schedule],
    seen_at: Mapping[int, int],
) -> RankState:
    """A rank as its saved stack shows it. A traceback that is not a wait, a sleep or a compile
    (and not a Ctrl-C, which stops a rank wherever it stands) is the exception that ended the
    rank: it is gone, at the user's line that raised."""
    r = RankProcess(stack.rank, stack.pid, None)
    state = _seen(r, reading, stack.log, schedule, seen_at, stack.state == "T")
    note = f"{stack.file}: ended by {stack.ended[:160]}" if stack.ended else ""
    source = "saved" if stack.form in ("saved", "py-spy") else "traceback"
    raised = (
        stack.ended
        and reading.activity not in ("waiting", "sleeping", "compiling")
        and not stack.ended.startswith("KeyboardInterrupt")
    )
    joined = "; ".join(n for n in (state.note, note) if n)
    return replace(state, activity="gone" if raised else state.activity, source=source, note=joined)


def _save(
    save: Path,
    ranks: Sequence[RankProcess],
    threads: Mapping,
    states: Sequence[RankState],
    logs: Mapping[int, dict],
    folder: Optional[Path],
    proc_states: Mapping[int, Optional[str]],
) -> None:
    """Write what the verdict rests on to ``save``, rank by rank: the stack (with its source
    lines), the process state, and what the rank's own file said at this moment (its last step,
    how long it had been quiet, how it ended); for a rank with no stack, what it was said to be
    and why. Beside them the run's ``spec.json``. Read back, they give this verdict again. What
    an earlier save left there goes first: the folder must never describe another job."""
    clear_saved(save)
    save.mkdir(parents=True, exist_ok=True)
    (save / SAVED_MARK).touch()
    said = {s.rank: s for s in states}
    for r in ranks:
        thread = threads.get(r.rank)
        state = (proc_states.get(r.pid) if r.pid else None) or ""
        log = {k: v for k, v in (logs.get(r.rank) or {}).items() if k in _SAVED_LOG}
        if isinstance(thread, dict):
            save_stack(save, r.rank, r.pid, state, _with_source(thread), log)
        elif r.rank in said:
            left = said[r.rank]
            save_stack(save, r.rank, r.pid, state, None, log, (left.activity, left.note))
    if folder is not None and (Path(folder) / "spec.json").is_file():
        shutil.copyfile(Path(folder) / "spec.json", save / "spec.json")


#: What of a rank's own file a saved stack keeps (not the instructions it ran: they stay in the run folder).
_SAVED_LOG = ("pid", "step", "age_s", "end", "message", "failure")


def _with_source(thread: dict) -> dict:
    """The thread with each frame's source line and the lines above it written in."""
    frames = []
    for f in thread.get("frames") or []:
        file, line = str(f.get("filename", "")), int(f.get("line") or 0)
        above = [_source(file, n) for n in range(max(1, line - CONTEXT_LINES), line)]
        frames.append({**f, "source": _source(file, line), "context": above})
    return {**thread, "frames": frames}


# -- the job's processes ----------------------------------------------------------------------


def find_ranks(pids: Sequence[int], folder: Optional[Path] = None) -> list[RankProcess]:
    """The ranks under ``pids`` (see the module docstring); InputError naming what to give instead."""
    procs = []
    for pid in pids:
        proc = read_proc(pid)
        if proc is None or not proc.alive:
            if len(pids) == 1:
                raise InputError(
                    f"no process {pid} is running: give the PID of a running job's launcher "
                    "(torchrun, deepspeed, explorer run) or of its ranks"
                )
            procs.append((pid, proc))
            continue
        # the target itself may be a rank (a list of rank PIDs), else its rank descendants; never
        # this process (a doctor started from the job's own kernel inherits its environment),
        # nor Python's own helpers (they keep the RANK of the kernel that started them)
        everyone = tree(pid)
        below = [
            p
            for p in everyone
            if p.rank is not None
            and p.is_python
            and not p.is_python_helper
            and p.pid != os.getpid()
        ]
        chosen = _outermost(below, everyone)
        if not chosen:
            if len(pids) > 1:
                procs.append((pid, proc))
                continue
            what = " ".join(proc.cmdline)[:80] or "?"
            kind = "a python process" if proc.is_python else "not a python process"
            raise InputError(
                f"PID {pid} ({what}) is {kind} with no rank below it (no process with RANK in "
                "its environment): give the launcher's PID or the ranks' PIDs of a torch.distributed job"
            )
        procs.extend((p.pid, p) for p in chosen)
    if folder is None and not any(p is not None and p.alive for _, p in procs):
        raise InputError(
            f"none of the PIDs {', '.join(map(str, pids))} is running: give a running job's PIDs, "
            "or --folder with the run folder its ranks wrote to"
        )
    return _numbered(procs, folder)


def ranks_in_folder(folder: Optional[Path]) -> list[RankProcess]:
    """The ranks a run folder names (``rank<R>.jsonl`` start lines), live where their process still runs."""
    files = sorted(Path(folder).glob("rank*.jsonl")) if folder is not None else []
    if folder is not None and not files and _launched_here(Path(folder)):
        return []  # its ranks have not opened their files yet: the schedule names them
    if (
        folder is not None
        and not files
        and (Path(folder) / "spec.json").is_file()
        and not of_torch_engine(Path(folder))
    ):
        from explorer.pipeline.runtime.run_folder import no_rank_wrote

        raise no_rank_wrote(Path(folder))
    if folder is None or not files:
        raise InputError(
            f"{folder} holds no rank<R>.jsonl, no Flight Recorder dump and no stack a rank left: "
            "give a run folder the ranks write to (explorer run --out, explorer.instrument), a "
            "folder of the ranks' Flight Recorder dumps (<prefix><rank>) or of their stacks "
            "(py-spy dumps, logs holding their tracebacks, doctor --save), or the job's PIDs"
        )
    out = []
    for rank in sorted(int(p.stem[4:]) for p in files if p.stem[4:].isdigit()):
        pid = _read_log(folder, rank).get("pid")
        proc = read_proc(pid) if isinstance(pid, int) else None
        if proc is not None and proc.rank != rank:
            proc = None  # the pid now belongs to another process
        elif proc is not None and holds_open(proc.pid, Path(folder) / f"rank{rank}.jsonl") is False:
            proc = None  # a live rank that writes another folder (this one is a copy of its run)
        out.append(RankProcess(rank, pid if isinstance(pid, int) else None, proc))
    return out


def _outermost(procs: list[Proc], tree: Optional[list[Proc]] = None) -> list[Proc]:
    """One process per rank: the highest in the tree with that RANK that launched no other job.

    A rank's own children inherit its environment (DataLoader workers, compile workers): they
    are below it, carry its job (RANK and MASTER_PORT), and are not the rank. A process whose
    descendants carry *another* job is a launcher, whatever RANK it holds: a notebook kernel or
    a test that once ran DeepSpeed in-process keeps DeepSpeed's RANK in the environment its
    children are started with, and that launcher must not be taken for rank 0. The walk up goes
    through every process of ``tree`` (default: ``procs``), those with no RANK too: torchrun,
    or the template the explorer's ranks are forked from, stands between such a launcher and
    its ranks.
    """
    everyone = procs if tree is None else tree
    job = {p.pid: (p.rank, p.env.get("MASTER_PORT")) for p in everyone}
    parent = {p.pid: p.ppid for p in everyone}
    launchers: set[int] = set()
    for p in procs:
        above = parent[p.pid]
        while above in job:
            if job[above] != job[p.pid]:
                launchers.add(above)
            above = parent[above]
    by_rank: dict[int, Proc] = {}
    for p in procs:  # parents come first
        if p.rank is not None and p.pid not in launchers and p.rank not in by_rank:
            by_rank[p.rank] = p
    return [by_rank[r] for r in sorted(by_rank)]


def _numbered(procs: list[tuple[int, Optional[Proc]]], folder: Optional[Path]) -> list[RankProcess]:
    """Each process with its rank (from RANK, else the folder's start lines, else list order)."""
    by_pid = _pids_in_folder(folder) if folder else {}
    out, used = [], set()
    for i, (pid, proc) in enumerate(procs):
        rank = proc.rank if proc is not None and proc.rank is not None else by_pid.get(pid, i)
        if rank in used:
            continue
        used.add(rank)
        out.append(RankProcess(rank, pid, proc))
    world = max((p.world_size or 0 for _, p in procs if p is not None), default=0)
    for rank in range(world):  # a rank whose process is gone from the tree: gone
        if rank not in used:
            out.append(RankProcess(rank, None, None))
    return sorted(out, key=lambda r: r.rank)


def _folder_of(ranks: list[RankProcess]) -> Optional[Path]:
    """The run folder a rank's command line names (``... worker RUN_DIR``), when it holds ``spec.json``."""
    for r in ranks:
        if r.proc is None:
            continue
        for arg in reversed(r.proc.cmdline[1:]):
            path = Path(arg) if Path(arg).is_absolute() else _cwd(r.proc.pid) / arg
            if (path / "spec.json").is_file():
                return path
    return None


def _cwd(pid: int) -> Path:
    """The folder a process runs in (its relative arguments are relative to it)."""
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return Path.cwd()


def _fill_from_logs(ranks: list[RankProcess], logs: dict[int, dict]) -> list[RankProcess]:
    """Ranks missing from the tree but present in the folder: their pid from their start line."""
    known = {r.rank for r in ranks}
    extra = [
        RankProcess(rank, log.get("pid"), None) for rank, log in logs.items() if rank not in known
    ]
    filled = [RankProcess(r.rank, r.pid or logs.get(r.rank, {}).get("pid"), r.proc) for r in ranks]
    return sorted(filled + extra, key=lambda r: r.rank)


# -- what the job wrote ---------------------------------------------------------------------


def _ranks_written(folder: Path, ranks: list[RankProcess]) -> list[int]:
    """The ranks found, and every rank with a ``rank<R>.jsonl`` in the folder."""
    written = {int(p.stem[4:]) for p in Path(folder).glob("rank*.jsonl") if p.stem[4:].isdigit()}
    return sorted(written | {r.rank for r in ranks})


def _pids_in_folder(folder: Path) -> dict[int, int]:
    out = {}
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        rank = path.stem[4:]
        if rank.isdigit():
            pid = _read_log(folder, int(rank)).get("pid")
            if pid is not None:
                out[pid] = int(rank)
    return out


def _read_log(folder: Optional[Path], rank: int) -> dict:
    """A rank's ``rank<R>.jsonl`` in brief: pid, last finished step, last line's type, age in seconds."""
    path = Path(folder or ".") / f"rank{rank}.jsonl"
    if folder is None or not path.is_file():
        return {}
    out: dict = {"age_s": max(0.0, time.time() - path.stat().st_mtime)}
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        kind = record.get("type")
        if kind == "start":
            out["pid"] = record.get("pid")
        elif kind == "instr":
            out["step"] = record.get("step")
            out.setdefault("ran", []).append(
                {k: record.get(k) for k in ("rank", "iteration", "text", "start")}
            )
        if kind in ("failure", "done"):
            out["end"] = kind
            out["message"] = record.get("message", "")
            out["failure"] = record if kind == "failure" else None
    return out


def _schedule(folder: Optional[Path]) -> tuple[Optional[Schedule], str, str]:
    """The run's schedule, P2P model and run id from ``spec.json`` (None, "blocking", "" where
    there is none)."""
    if folder is None or not (Path(folder) / "spec.json").is_file():
        return None, "blocking", ""
    from explorer.pipeline.runtime.run_folder import check_one_run
    from explorer.pipeline.runtime.spec import RunSpec

    try:
        spec = RunSpec.read(Path(folder))
        schedule = spec.build_schedule()
    except (InputError, ValueError, KeyError, TypeError):  # JSONDecodeError is a ValueError
        return None, "blocking", ""
    check_one_run(Path(folder), spec.run_id)  # another run's spec would judge these ranks
    return schedule, str(schedule.params.get("p2p", "blocking")), spec.run_id


# -- one rank's state --------------------------------------------------------------------------


def _staged(state: RankState, schedule: Optional[Schedule]) -> RankState:
    """``state`` with the one stage its rank holds, where the schedule gives one: a rank stopped
    in the barrier between iterations is in no instruction, yet it is still that stage."""
    if schedule is None or state.at is not None or state.rank >= schedule.num_ranks:
        return state
    stages = schedule.stages_of_rank(state.rank)
    return replace(state, stage=stages[0]) if len(stages) == 1 else state


def state_at_stack(before: Optional[str], after: Optional[str]) -> Optional[str]:
    """The process state that goes with a stack read between two readings of it. A process that
    stopped while its stack was read (``kill -STOP`` a moment later) was not stopped where that
    stack shows it: called stopped there, a rank still in its rendezvous was once said to stand
    stopped at a line it had left. Stopped before and after: it stood where the stack shows."""
    return before if after == "T" and before != "T" else after


def _state(
    r: RankProcess,
    reading: Union[StackReading, str, None],
    log: Optional[dict],
    schedule: Optional[Schedule],
    seen_at: Mapping[int, int],
    proc_states: Mapping[int, Optional[str]],
) -> RankState:
    log = log or {}
    if not r.alive and log.get("end") == "done":  # its own last line says it ran to its end
        return _from_log(r, log, schedule, "finished", "")
    if not r.alive:
        return _from_log(r, log, schedule, "gone", "no process" + _last(log))
    if not isinstance(reading, StackReading):
        return _from_log(r, log, schedule, "unseen", (reading or "no stack") + _last(log))
    # a stopped process keeps the stack it had: what it "does" there, it will not go on doing
    stopped = r.pid is not None and proc_states.get(r.pid) == "T"
    return _seen(r, reading, log, schedule, seen_at, stopped)


def _seen(
    r: RankProcess,
    reading: StackReading,
    log: dict,
    schedule: Optional[Schedule],
    seen_at: Mapping[int, int],
    stopped: bool,
) -> RankState:
    """A rank whose stack was read (live or saved), placed in the schedule where it is known."""
    row = None
    if schedule is not None and r.rank < schedule.num_ranks:
        row = locate(schedule, r.rank, reading, after_step=log.get("step", -1))
    at, mb = placed(schedule, row) if schedule is not None else (None, -1)
    note = "a fault planted on purpose (Fault how='hang')" if reading.fault else ""
    peer = reading.peer_rank
    if reading.engine == "torch":
        note, peer = torch_words(reading), torch_peer(reading, r.rank, schedule, seen_at)
    return RankState(
        rank=r.rank,
        pid=r.pid,
        activity="stopped" if stopped else reading.activity,
        op=reading.op,
        peer=peer,
        tag=reading.tag,
        at=at,
        microbatch=mb,
        where=_short(reading.where),
        engine=reading.engine,
        since_s=log.get("age_s"),
        note=note,
    )


def _thread(r: RankProcess, dumps: dict[int, Dump]) -> Union[dict, str]:
    """The rank's main thread from its live dump (py-spy's JSON), or why there is none."""
    dump = dumps.get(r.pid) if r.pid is not None else None
    if dump is None or dump.refused or not dump.threads:
        return dump.refused if dump is not None and dump.refused else "no stack"
    return dict(main_thread(list(dump.threads), r.pid or 0))


def _read(thread: Mapping) -> StackReading:
    """What one thread's stack says (its frames' source from the dump where saved, else the file)."""
    return read_stack(frames_from_pyspy(thread, _source), bool(thread.get("active")))


def _from_log(
    r: RankProcess, log: dict, schedule: Optional[Schedule], activity: Activity, note: str
) -> RankState:
    """A rank described from its own file: where it stopped (the step after its last finished one).

    A rank that ended because its peer went away or its exchange timed out wrote where it
    waited (its ``failure`` line): it is a waiter on that peer, so the verdict can follow it.
    """
    waited = _waited_in(log.get("failure"), schedule, r.rank)
    if waited is not None:
        return replace(waited, pid=r.pid, since_s=log.get("age_s"), source="log", note=note)
    row = None
    if schedule is not None and r.rank < schedule.num_ranks:
        row = _failed_at(log.get("failure"), schedule, r.rank)
        if row is None and "step" in log:
            row = first_row_of_step(schedule, r.rank, int(log["step"]) + 1)
    at, mb = placed(schedule, row) if schedule is not None else (None, -1)
    return RankState(
        rank=r.rank,
        pid=r.pid,
        activity=activity,
        at=at,
        microbatch=mb,
        since_s=log.get("age_s"),
        source="log" if log else "none",
        note=note,
    )


def _plan_fits(plan: Schedule, schedule: Optional[Schedule], ranks: set[int]) -> None:
    """A plan of another size than the job is refused: its departures would be the sizes'
    difference (a 2-rank run against a 4-stage plan "left it" at its first load), and ranks
    beyond the plan's would go unchecked."""
    size = lambda s: (s.num_ranks, s.num_stages, s.num_microbatches)  # noqa: E731
    if schedule is not None and size(plan) != size(schedule):
        raise InputError(
            f"the plan ({plan.num_ranks} ranks, {plan.num_stages} stages, {plan.num_microbatches} "
            f"micro-batches) is not the size of the job ({schedule.num_ranks} ranks, "
            f"{schedule.num_stages} stages, {schedule.num_microbatches} micro-batches): give "
            "--stages and --microbatches as the job ran"
        )
    if ranks and max(ranks) >= plan.num_ranks:
        raise InputError(
            f"the job has rank {max(ranks)}, the plan only ranks 0..{plan.num_ranks - 1}: give "
            "--stages and --microbatches as the job ran"
        )


def _failed_at(failure: Optional[dict], schedule: Schedule, rank: int) -> Optional[int]:
    """The row of the instruction a rank's own ``failure`` line names (its step and text), else
    None: a rank that failed in an instruction was there, not at the step after its last one."""
    if not failure or not isinstance(failure.get("step"), int) or not failure.get("text"):
        return None
    sl = schedule.rank_slice(rank)
    return next(
        (
            i
            for i in range(sl.start, sl.stop)
            if int(schedule.step[i]) == failure["step"]
            and str(schedule.instruction(i)) == failure["text"]
        ),
        None,
    )


def _waited_in(
    failure: Optional[dict], schedule: Optional[Schedule], rank: int
) -> Optional[RankState]:
    """The wait a ``failure`` line records (a peer gone, a timeout, in a send or receive, or a
    peer gone in the collective between instructions), else None."""
    if not failure or schedule is None or failure.get("kind") not in ("peer", "timeout"):
        return None
    collective = failure.get("collective")
    if failure.get("kind") == "peer" and not failure.get("text") and isinstance(collective, str):
        return RankState(rank=rank, pid=None, activity="waiting", op=collective)
    try:
        ins = parse_instruction(str(failure.get("text") or ""))
    except InputError:
        return None
    if not ins.kind.is_p2p or not 0 <= peer_stage(ins.stage, ins.kind) < schedule.num_stages:
        return None
    reading = StackReading(
        "waiting",
        step=failure.get("step"),
        kind=ins.kind,
        peer_stage=peer_stage(ins.stage, ins.kind),
    )
    at, mb = placed(schedule, locate(schedule, rank, reading))
    return RankState(
        rank=rank,
        pid=None,
        activity="waiting",
        op="send" if ins.kind.is_send else "recv",
        peer=schedule.stage_to_rank[peer_stage(ins.stage, ins.kind)],
        at=at,
        microbatch=mb,
    )


def _last(log: dict) -> str:
    if not log:
        return ""
    failure = log.get("failure")
    if failure:
        message = " ".join(str(failure.get("message", "")).split())
        tail = message if len(message) <= 70 else "..." + message[-67:]
        return f"; it ended ({failure.get('kind', 'error')}): {tail}"
    if "end" in log:
        return "; it finished its run"
    if "step" in log:
        return f"; its last finished step: {log['step']}"
    return "; it wrote no step"


def _short(where: str) -> str:
    """``file:line`` relative to the working folder when the file is below it (as a person typed it)."""
    cwd = str(Path.cwd()) + "/"
    return where[len(cwd) :] if where.startswith(cwd) else where


def _source(file: str, line: int) -> str:
    return linecache.getline(file, line).strip()


__all__ = ["Diagnosis", "RankProcess", "doctor", "find_ranks"]
