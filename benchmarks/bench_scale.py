"""Time ``explorer read JOB_DIR`` on a job of thousands of ranks: read, folded, outliers named, clocks.

    python benchmarks/bench_scale.py [--ranks 1024] [--events 10000] [--work DIR] [--run DIR] [--keep]

The job is made from one real run of the explorer's engine (recorded here unless ``--run``
names a run folder) by ``benchmarks/scale_job.py``'s generator: 4 stages, ``ranks / 4``
replicas, about ``events`` instructions per rank, known offsets, jitter and two planted
stragglers. ``explorer read JOB --json`` then runs in a child process: its wall time (start-up
included) and its peak resident memory (``ru_maxrss`` of the child) are the figures; the named
outliers are checked against the planted truth, and the recovered clock offsets against the
planted ones. Goal: 1,024 ranks x 10,000 events in under
60 s and 2 GB on a 2-core machine. msgspec (``explorer[scale]``) is used when installed; the
line says which decoder ran.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

import replicated_job  # noqa: E402  (the generator is test code, shared with tests/pipeline)
import scale_job  # noqa: E402


def make_job(run: Path, work: Path, ranks: int, events: int) -> tuple[Path, dict, float]:
    """The job folder (made once per size), its truth and the seconds it took to write."""
    job = work / f"job-{ranks}x{events}"
    if (job / replicated_job.TRUTH).is_file():
        return job, json.loads((job / replicated_job.TRUTH).read_text()), 0.0
    shutil.rmtree(job, ignore_errors=True)
    t0 = time.perf_counter()
    replicated_job.replicate(run, job, replicas=ranks // 4, events=events, seed=1)
    took = time.perf_counter() - t0
    return job, json.loads((job / replicated_job.TRUTH).read_text()), took


def read_in_child(job: Path, *extra: str) -> tuple[dict, float, float, float]:
    """``explorer read JOB --json`` in a child: its document, wall and CPU seconds, peak MB.

    The CPU seconds are what the wall time would be on an idle machine (the reader uses one
    core); on a shared one the wall time also counts the waits for a core."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    start = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-m", "explorer", "read", str(job), "--json", *extra],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.perf_counter() - t0
    end = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (end.ru_utime + end.ru_stime) - (start.ru_utime + start.ru_stime)
    if out.returncode not in (0, 1):
        raise SystemExit(f"explorer read failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return json.loads(out.stdout), wall, cpu, end.ru_maxrss / 1024


def verdict(doc: dict, truth: dict) -> tuple[int, int, int]:
    """(planted stragglers named, planted in all, outliers that were not planted)."""
    planted = {(s["rank"], s["kind"], s["from_iteration"]) for s in truth["stragglers"]}
    named = {(o["rank"], o["kind"], o["first_iteration"]) for o in doc["outliers"]}
    return len(planted & named), len(planted), len(named - planted)


def offsets(doc: dict, truth: dict) -> str:
    """How the recovered offsets compare with the planted ones (relative to each replica's
    first rank). The recorded run's ranks have their own small skew (each leaves a barrier at
    its own moment), which is part of every copy's true offset: the error includes it."""
    clocks = doc.get("clocks") or {}
    planted, p = truth["offsets_s"], truth["pipeline_ranks"]
    errors = [
        abs(o["estimate_s"] - (planted[o["rank"]] - planted[o["reference"]]))
        for o in clocks.get("offsets", [])
        if o["estimate_s"] is not None and o["rank"] != o["reference"]
    ]
    if not errors:
        return "offsets: none bounded"
    errors.sort()
    width = max(abs(x) for x in planted)
    return (
        f"offsets: {len(errors)} bounded (of {truth['replicas'] * (p - 1)}), |estimate - planted| "
        f"median {errors[len(errors) // 2] * 1e3:.3f} ms, max {errors[-1] * 1e3:.3f} ms "
        f"(planted up to {width * 1e3:.0f} ms), {len(clocks.get('contradicted', []))} replicas "
        "contradicted"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[1024])
    ap.add_argument("--events", type=int, default=10000, help="instructions per rank (about)")
    ap.add_argument("--work", type=Path, default=None, help="where the jobs are written")
    ap.add_argument("--run", type=Path, default=None, help="a recorded run folder (4 stages)")
    ap.add_argument("--keep", action="store_true", help="keep the jobs (they take GBs)")
    ap.add_argument(
        "--one-core", action="store_true", help="also read each job in one process, first"
    )
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    run = args.run or scale_job.record(work / "recorded")
    print(f"# {platform.node()} {os.cpu_count()} cores, python {platform.python_version()}")
    for ranks in args.ranks:
        job, truth, made = make_job(run, work, ranks, args.events)
        size = sum(p.stat().st_size for p in job.glob("rank*.jsonl")) / 1e9
        if args.one_core:  # the same job read by one process, first, side by side
            one, one_wall, one_cpu, one_peak = read_in_child(job, "--workers", "1")
            print(
                f"{ranks} ranks, one process: {one_wall:.1f} s wall, {one_cpu:.1f} s CPU, "
                f"peak {one_peak:.0f} MB",
                flush=True,
            )
        doc, wall, cpu, peak = read_in_child(job)
        found, planted, false = verdict(doc, truth)
        print(
            f"{ranks} ranks x {doc['instructions'] // max(1, doc['ranks']):,} events "
            f"({doc['instructions']:,} instructions, {size:.2f} GB of rank files, written in "
            f"{made:.0f} s): read + fold + named in {wall:.1f} s wall, {cpu:.1f} s CPU "
            f"(reader {doc['seconds']:.1f} s, {doc['decoder']}), peak {peak:.0f} MB; stragglers named {found}/{planted}, "
            f"false outliers {false}, unread {len(doc['unread'])}; {offsets(doc, truth)}",
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
