"""How fast ``explorer read`` answers for a job's TORCH_TRACE and profiler traces, and what period detection costs.

A real job (:mod:`explorer.compile.runtime.example_job`, ``period4``, aot_eager) runs
``--iterations`` profiled iterations, so its profiler trace is as long as a user's; its
structured trace is then copied as 8 and 64 ranks (the same content, ``rank_N`` names) to
time reading and merging many ranks. Then :func:`find_time_period` on 1,000 and 10,000
iterations of noise (the worst case: every k is tried). Goals: a read of the recorded job
under 2 s with its period 4 found; 64 ranks under 10 s; period detection on 10,000 iterations
under 1 s.

    .venv/bin/python benchmarks/bench_compile_read.py [--iterations 400]
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _timed(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def _mb(paths) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()

    from explorer.compile.analysis.from_trace import read_job
    from explorer.compile.analysis.period import find_time_period
    from explorer.compile.runtime.example_job import record

    work = Path(tempfile.mkdtemp(prefix="bench-compile-read-"))
    ok = True
    try:
        start = time.perf_counter()
        job = record("period4", work / "job", iterations=args.iterations)
        print(f"recorded {args.iterations} iterations in {time.perf_counter() - start:.1f} s")
        traces, profiles = list((job / "torch_trace").iterdir()), list((job / "profiler").iterdir())
        seconds, result = _timed(lambda: read_job(job))
        d = result.diagnosis  # type: ignore[union-attr]
        print(
            f"read: {_mb(traces):.2f} MB trace + {_mb(profiles):.2f} MB profiler trace in {seconds:.3f} s; "
            f"{len(result.iterations)} iterations, {d.cause} period {d.period} ({d.confidence})"
        )  # type: ignore[union-attr]
        ok &= seconds < 2.0 and d.period == 4  # type: ignore[union-attr]
        for ranks in (8, 64):
            folder = work / f"ranks{ranks}"
            folder.mkdir()
            for r in range(ranks):
                shutil.copy(traces[0], folder / f"dedicated_log_torch_trace_rank_{r}_bench.log")
            seconds, merged = _timed(lambda: read_job(folder), repeat=1)
            print(
                f"read {ranks} ranks: {_mb(list(folder.iterdir())):.1f} MB in {seconds:.3f} s "
                f"({len(merged.ranks)} ranks merged)"
            )  # type: ignore[union-attr]
            ok &= seconds < (10.0 if ranks == 64 else 2.0)
        rng = random.Random(0)
        for n in (1_000, 10_000):
            times = [1.0 + rng.gauss(0, 0.01) for _ in range(n)]
            seconds, found = _timed(lambda: find_time_period(list(range(n)), times))
            print(
                f"find_time_period on {n:,} noise iterations: {seconds * 1e3:.1f} ms (found {found})"
            )
            ok &= n < 10_000 or seconds < 1.0
        print(
            f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("goals met" if ok else "a goal was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
