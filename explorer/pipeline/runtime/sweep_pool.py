"""Check many sizes on every core, each worker a child process, user code included.

The parent splits the stage counts among ``workers`` children (interleaved, so each gets
small and large sizes alike), and each child checks its share a group of sizes at a time
(:func:`~explorer.pipeline.analysis.sizes.check_group`: their timelines are simulated together),
writing one JSON line per size as soon as its group is checked; a child also says which size
it is about to build (a heartbeat), so a ``--from`` class that hangs is named at its size. With
several rule sets (``explorer fix``) each size is built once and every set applied to it. The
parent merges the lines and reports progress (the CLI draws it as a bar). The children are
started and ended by the one process supervisor (:mod:`explorer.processes`): each in a session
of its own, ended with its process group, so Ctrl-C in the parent keeps what was checked, stops
the rest, and leaves nothing behind; when no worker has said anything for ``timeout_s`` (a
``--from`` class that sleeps) they are stopped and the size the silent one was building is
named. A ``--from`` class is only ever imported in a child.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional, Sequence

from explorer.errors import InputError, excerpt, one_line
from explorer.gcpause import frozen_imports
from explorer.pipeline.analysis.sizes import Asking, SizeCell, SizeSweep
from explorer.processes import Child, Engine, Report, Supervised, supervise
from explorer.processes.heap import keep_freed_memory
from explorer.processes.isolate import MARKER


def default_workers() -> int:
    """One worker per core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def sweep_in_workers(
    job: dict,
    stages: Sequence[int],
    microbatches: Sequence[int],
    *,
    spec: str,
    workers: int,
    timeout_s: float,
    progress: Optional[Callable[[int, int], None]] = None,
) -> SizeSweep:
    """Check every size of ``job`` (see :func:`build_from_job`) in ``workers`` child processes."""
    return sweep_rule_sets_in_workers(
        job,
        [[]],
        stages,
        microbatches,
        spec=spec,
        workers=workers,
        timeout_s=timeout_s,
        progress=progress,
    )[0]


def sweep_rule_sets_in_workers(
    job: dict,
    rule_sets: Sequence[Sequence[str]],
    stages: Sequence[int],
    microbatches: Sequence[int],
    *,
    spec: str,
    workers: int,
    timeout_s: float,
    progress: Optional[Callable[[int, int], None]] = None,
) -> list[SizeSweep]:
    """One sweep per set of rule names (applied after ``job``'s own), in one pass over the
    sizes: each schedule is built once per size and each set applied to it, so a ``--from``
    class is imported once per worker and asked once per size however many sets ``explorer fix``
    tries."""
    total = len(stages) * len(microbatches) * len(rule_sets)
    shares = [list(stages[i::workers]) for i in range(min(workers, len(stages)))]
    cells: dict[tuple[int, int, int], SizeCell] = {}
    building: dict[int, tuple[int, int]] = {}

    def heard(reports: list[Report]) -> None:
        for report in reports:
            if report.kind == "building":  # heartbeat: the size being built now
                building[report.rank] = tuple(report.data["building"])
                continue
            cell = SizeCell.from_dict(dict(report.data))
            cells[(report.data.get("set", 0), cell.stages, cell.microbatches)] = cell
        if progress is not None:
            progress(len(cells), total)

    interrupted = False
    with tempfile.TemporaryDirectory(prefix="explorer-sweep-") as folder:
        pool = _SweepWorkers(Path(folder), job, rule_sets, shares, microbatches)
        try:
            done = supervise(pool, on_report=heard, stall_s=timeout_s)
        except KeyboardInterrupt:
            interrupted = True
        else:
            _raise_if_failed(done, pool, shares, microbatches, cells, building, timeout_s)
    sweeps = []
    for k in range(len(rule_sets)):
        ordered = tuple(cells[key] for key in sorted(cells) if key[0] == k)
        if ordered and not interrupted and all(c.skipped for c in ordered):
            raise InputError(
                f"none of the {len(ordered):,} sizes in {spec} applies to this schedule "
                f"(at {ordered[0].stages}x{ordered[0].microbatches}: {excerpt(ordered[0].skipped, 160)})"
            )
        sweeps.append(SizeSweep(ordered, spec, interrupted=interrupted))
    return sweeps


class _SweepWorkers(Engine):
    """The sweep's children for the one supervisor: each checks a share of the stage counts and
    says, one JSON line at a time on its stdout, the size it builds and each size checked."""

    def __init__(
        self,
        folder: Path,
        job: dict,
        rule_sets: Sequence[Sequence[str]],
        shares: list[list[int]],
        microbatches: Sequence[int],
    ) -> None:
        self.folder, self.job, self.rule_sets = folder, job, rule_sets
        self.shares, self.microbatches = shares, microbatches

    def children(self) -> list[Child]:
        out = []
        for rank, share in enumerate(self.shares):
            payload = self.folder / f"job{rank}.json"
            payload.write_text(
                json.dumps(
                    {
                        **self.job,
                        "rule_sets": [list(r) for r in self.rule_sets],
                        "stages": share,
                        "microbatches": list(self.microbatches),
                        "path": sys.path,
                    }
                )
            )
            out.append(
                Child(
                    rank=rank,
                    argv=[
                        sys.executable,
                        "-m",
                        "explorer.pipeline.runtime.sweep_pool",
                        str(payload),
                    ],
                    env=dict(os.environ),
                    log=self.folder / f"worker{rank}.log",
                    pipe_stdout=True,
                )
            )
        return out

    def read_line(self, rank: int, line: str) -> Optional[Report]:
        said = json.loads(line)
        return Report(rank, "building" if "building" in said else "cell", said)

    def said(self, rank: int) -> str:
        """What worker ``rank`` wrote on its stderr (a user's prints, its last words)."""
        return (self.folder / f"worker{rank}.log").read_text(errors="replace")


def _raise_if_failed(
    done: Supervised,
    pool: _SweepWorkers,
    shares: list[list[int]],
    microbatches: Sequence[int],
    cells: dict,
    building: dict[int, tuple[int, int]],
    timeout_s: float,
) -> None:
    """A worker that stayed silent names the size it hung at; one that failed says why (its marked
    line) or its exit code and last line."""
    if done.ending == "stalled":
        rank = min(done.stopped) if done.stopped else 0
        at = building.get(rank) or _next_size(shares[rank], microbatches, cells)
        raise InputError(
            f"checking size {at[0]}x{at[1]} took longer than {timeout_s:g} s and was "
            "stopped (a --from class that hangs?); give --timeout SECONDS to allow longer"
        )
    for rank in sorted(done.exits):
        code = done.exits[rank].returncode
        if code == 0 or rank in done.stopped:
            continue
        err = pool.said(rank)
        said = next(
            (ln[len(MARKER) :] for ln in reversed(err.splitlines()) if ln.startswith(MARKER)),
            None,
        )
        if said:
            raise InputError(said)
        last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
        raise InputError(
            f"a sweep worker ended with exit code {code}"
            f"{' (' + excerpt(last, 160) + ')' if last else ''}; the sizes it had checked are lost"
        )


def _next_size(stages: Sequence[int], microbatches: Sequence[int], done: dict) -> tuple[int, int]:
    for p in stages:
        for m in microbatches:
            if (0, p, m) not in done:
                return p, m
    return stages[-1], microbatches[-1]


def build_from_job(job: dict) -> Callable[[int, int], object]:
    """The ``make(stages, microbatches)`` a job describes: a generator or a ``--from`` class, then ``rules``."""
    from explorer.cli_options import schedule_size
    from explorer.pipeline.analysis import build
    from explorer.pipeline.analysis.conventions import under_conventions
    from explorer.pipeline.analysis.rules import apply_rules, parse_rules

    rules = parse_rules(job.get("rules") or [])
    conventions = job.get("conventions") or {}
    chunks = job.get("chunks", 1)
    if job.get("from"):
        from explorer.pipeline.schedules.adapters import from_deepspeed, load_class

        with frozen_imports():  # only ever in a process of its own: a pool worker (gcpause)
            cls = load_class(job["from"])

        def made(p: int, m: int) -> object:
            schedule_size(None, p, m)  # the single check's limits: a cell it refuses is skipped
            return apply_rules(under_conventions(from_deepspeed(cls, p, m), **conventions), rules)

        return made

    def built(p: int, m: int) -> object:
        schedule_size(job["kind"], p, m, chunks)  # as the single check refuses it, so does the cell
        schedule = build(
            job["kind"], p, m, chunks=chunks, buffers=job.get("buffers"), order=job.get("order")
        )
        return apply_rules(under_conventions(schedule, **conventions), rules)

    return built


def asking_from_job(job: dict) -> Asking:
    """How each size is checked: the single check's P2P model and communicators."""
    return Asking(model=job.get("model"), communicators=job.get("communicators") or "eager")


def _built_once(make: Callable, group: Sequence[tuple[int, int]], heartbeat: Callable) -> dict:
    """The schedule at each size of ``group`` (or the ``InputError`` saying it does not apply),
    built once for every rule set tried on it."""
    built: dict = {}
    for p, m in group:
        heartbeat(p, m)
        try:
            built[(p, m)] = make(p, m)
        except InputError as exc:
            built[(p, m)] = exc
    return built


def main() -> int:
    """Worker side: read the job from the file named on the command line, write one JSON line per
    size on stdout. The worker keeps the memory it frees (:mod:`explorer.processes.heap`): it
    builds and checks thousands of schedules, each allocating and freeing megabytes."""
    keep_freed_memory()
    job = json.loads(Path(sys.argv[1]).read_text())
    sys.path[:] = job["path"]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # a user's prints go to stderr, never into the stream of cells
    from explorer.pipeline.analysis.rules import apply_rules, parse_rules
    from explorer.pipeline.analysis.sizes import check_group, size_groups

    def building(p: int, m: int) -> None:
        out.write(json.dumps({"building": [p, m]}) + "\n")

    try:
        make = build_from_job(job)
        rule_sets = [parse_rules(names) for names in job.get("rule_sets") or [[]]]
        for group in size_groups(job["stages"], job["microbatches"]):
            built = _built_once(make, group, building)
            for k, rules in enumerate(rule_sets):

                def made(p: int, m: int, rules=rules):
                    schedule = built[(p, m)]
                    if isinstance(schedule, InputError):
                        raise schedule
                    return apply_rules(schedule, rules)

                for cell in check_group(made, group, asking=asking_from_job(job)):
                    if cell.skipped and job.get(
                        "from"
                    ):  # a user's class that fails at a size is not "not applicable"
                        raise InputError(f"at {cell.stages}x{cell.microbatches}: {cell.skipped}")
                    out.write(json.dumps({**cell.to_dict(), "set": k}) + "\n")
    except InputError as exc:
        print(MARKER + one_line(str(exc)), file=sys.stderr)
        return 2
    except (KeyboardInterrupt, SystemExit, Exception) as exc:
        where = f"--from {excerpt(job['from'])}" if job.get("from") else "the schedule"
        print(
            MARKER
            + one_line(f"{where} raised {type(exc).__name__} ({str(exc)[:200]}) during the sweep"),
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = [
    "default_workers",
    "sweep_in_workers",
    "build_from_job",
    "asking_from_job",
    "main",
]
