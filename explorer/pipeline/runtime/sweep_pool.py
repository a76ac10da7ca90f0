"""Check many sizes on every core, each worker a child process, user code included.

The parent splits the stage counts among ``workers`` children (interleaved, so each gets
small and large sizes alike), and each child checks its share a group of sizes at a time
(:func:`~explorer.pipeline.analysis.sizes.check_group`: their timelines are simulated together),
writing one JSON line per size as soon as its group is checked; a child also says which size
it is about to build (a heartbeat), so a ``--from`` class that hangs is named at its size. With
several rule sets (``explorer fix``) each size is built once and every set applied to it. The
parent merges the lines, reports progress (the CLI draws it as a bar), and stops a child that
stays silent longer than ``timeout_s`` on one size (a ``--from`` class that sleeps), naming that size. The children run in their own
sessions and die with their process group, so Ctrl-C in the parent keeps what was checked,
stops the rest, and leaves nothing behind. A ``--from`` class is only ever imported in a child.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from typing import Callable, Optional, Sequence

from explorer.errors import InputError, excerpt, one_line
from explorer.pipeline.analysis.sizes import Asking, SizeCell, SizeSweep
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
    procs, cells, buffers, building = [], {}, {}, {}
    selector = selectors.DefaultSelector()
    interrupted = False
    try:
        for share in shares:
            payload = json.dumps(
                {
                    **job,
                    "rule_sets": [list(r) for r in rule_sets],
                    "stages": share,
                    "microbatches": list(microbatches),
                    "path": sys.path,
                }
            )
            proc = subprocess.Popen(
                [sys.executable, "-m", "explorer.pipeline.runtime.sweep_pool"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            assert proc.stdin is not None and proc.stdout is not None  # both PIPE above
            proc.stdin.write(payload.encode())
            proc.stdin.close()
            os.set_blocking(proc.stdout.fileno(), False)
            selector.register(proc.stdout, selectors.EVENT_READ, proc)
            procs.append(proc)
            buffers[proc.pid] = b""
        last_heard = {p.pid: time.monotonic() for p in procs}
        open_streams = len(procs)
        while open_streams:
            for key, _ in selector.select(timeout=0.5):
                proc = key.data
                chunk = proc.stdout.read()
                if chunk:
                    last_heard[proc.pid] = time.monotonic()
                    buffers[proc.pid] += chunk
                    *lines, buffers[proc.pid] = buffers[proc.pid].split(b"\n")
                    for line in lines:
                        said = json.loads(line)
                        if "building" in said:  # heartbeat: the size being built now
                            building[proc.pid] = tuple(said["building"])
                            continue
                        cell = SizeCell.from_dict(said)
                        cells[(said.get("set", 0), cell.stages, cell.microbatches)] = cell
                    if progress is not None:
                        progress(len(cells), total)
                elif chunk == b"":  # end of stream
                    selector.unregister(proc.stdout)
                    open_streams -= 1
            for proc in procs:
                if proc.poll() is None and time.monotonic() - last_heard[proc.pid] > timeout_s:
                    _stop(procs)
                    at = building.get(proc.pid) or _next_size(
                        proc_share(shares, procs, proc), microbatches, cells
                    )
                    raise InputError(
                        f"checking size {at[0]}x{at[1]} took longer than {timeout_s:g} s and was "
                        "stopped (a --from class that hangs?); give --timeout SECONDS to allow longer"
                    )
        for proc in procs:
            proc.wait()
            err = proc.stderr.read().decode(errors="replace")
            if proc.returncode != 0:
                said = next(
                    (
                        ln[len(MARKER) :]
                        for ln in reversed(err.splitlines())
                        if ln.startswith(MARKER)
                    ),
                    None,
                )
                if said:
                    raise InputError(said)
                last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
                raise InputError(
                    f"a sweep worker ended with exit code {proc.returncode}"
                    f"{' (' + excerpt(last, 160) + ')' if last else ''}; the sizes it had checked are lost"
                )
    except KeyboardInterrupt:
        interrupted = True
    finally:
        _stop(procs)
        selector.close()
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


def proc_share(shares: list, procs: list, proc: subprocess.Popen) -> list[int]:
    return shares[procs.index(proc)]


def _next_size(stages: Sequence[int], microbatches: Sequence[int], done: dict) -> tuple[int, int]:
    for p in stages:
        for m in microbatches:
            if (0, p, m) not in done:
                return p, m
    return stages[-1], microbatches[-1]


def _stop(procs: Sequence[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()


def build_from_job(job: dict) -> Callable[[int, int], object]:
    """The ``make(stages, microbatches)`` a job describes: a generator or a ``--from`` class, then ``rules``."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.analysis.rules import apply_rules, parse_rules
    from explorer.pipeline.schedules.torch_csv import with_p2p_conventions

    rules = parse_rules(job.get("rules") or [])
    conventions = job.get("conventions") or {}
    if job.get("from"):
        from explorer.pipeline.schedules.adapters import from_deepspeed, load_class

        cls = load_class(job["from"])
        return lambda p, m: apply_rules(
            with_p2p_conventions(from_deepspeed(cls, p, m), **conventions), rules
        )
    return lambda p, m: apply_rules(
        with_p2p_conventions(
            build(
                job["kind"],
                p,
                m,
                chunks=job.get("chunks", 1),
                buffers=job.get("buffers"),
                order=job.get("order"),
            ),
            **conventions,
        ),
        rules,
    )


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
    """Worker side: read the job on stdin, write one JSON line per size on stdout."""
    job = json.loads(sys.stdin.read())
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
    "proc_share",
    "build_from_job",
    "asking_from_job",
    "main",
]
