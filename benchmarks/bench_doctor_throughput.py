"""A job's throughput while ``explorer doctor`` reads it, against the same job left alone.

The doctor reads each rank with ``py-spy dump --nonblocking``: the ranks are never paused, so
what a diagnosis can cost a running job is the CPU the doctor itself uses while the job needs
it. This measures it on a real job, in one run, side by side: a 2-rank gloo job of steps (a
matmul of ``--work`` size then an ``all_reduce``; ``--gpu-like`` adds a 20 ms sleep per step,
as a rank waiting on its GPU leaves its CPU idle) writes each step's end time; the run
alternates windows of ``--window-s`` seconds left alone and windows with one diagnosis at their
start (``python -m explorer doctor PID --json``, as a person types it, or ``--in-process``:
``doctor([pid])``), ``--pairs`` times. Throughput is steps per second of rank 0 in each window;
the result is the median over pairs of (diagnosed / alone), and the longest step seen in each
kind of window (a pause would show there).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_doctor_throughput.py [--pairs 8] [--window-s 10]

Goal (issue 24): throughput within 2 % of undisturbed. Exits 1 when missed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from explorer.pipeline.runtime.doctor import doctor
from explorer.processes import free_port, rank_env

GOAL = 0.02
JOB = """
import sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
n, gpu_like, out = int(sys.argv[1]), sys.argv[2] == "1", sys.argv[3]
a = torch.randn(n, n)
with open(out, "w", buffering=1) as f:
    while True:
        b = a @ a
        if gpu_like:
            time.sleep(0.02)
        dist.all_reduce(b[:1, :1])
        f.write(f"{time.monotonic()}\\n")
"""


def steps_between(path: Path, t0: float, t1: float) -> tuple[int, float]:
    """Steps that ended in [t0, t1), and the longest of them (seconds)."""
    ends = [float(x) for x in path.read_text().split()]
    inside = [e for e in ends if t0 <= e < t1]
    gaps = [b - a for a, b in zip(ends, ends[1:]) if t0 <= b < t1]
    return len(inside), max(gaps, default=0.0)


def diagnose(pids: list[int], in_process: bool) -> None:
    """One diagnosis of the job's ranks; a moving job must not be called hung by it."""
    if in_process:
        verdict = doctor(pids).verdict
    else:
        out = subprocess.run(
            [sys.executable, "-m", "explorer", "doctor", *map(str, pids), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        verdict = out.stdout
    print(f"  diagnosis: {getattr(verdict, 'verdict', None) or verdict[:60]!r}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--work", type=int, default=256, help="matmul size per step")
    parser.add_argument("--gpu-like", action="store_true")
    parser.add_argument("--in-process", action="store_true")
    args = parser.parse_args()
    print(f"# load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(prefix="bench-doctor-tp-") as tmp:
        script, out = Path(tmp) / "job.py", Path(tmp) / "steps0.txt"
        script.write_text(JOB)
        port = free_port()
        ranks = [
            subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    str(args.work),
                    "1" if args.gpu_like else "0",
                    str(Path(tmp) / f"steps{r}.txt"),
                ],
                env=rank_env(r, 2, port, threads=1),
                stderr=subprocess.DEVNULL,  # the kill at the end makes the other rank complain
            )
            for r in range(2)
        ]
        try:
            while not out.exists() or len(out.read_text().split()) < 50:  # warmed up
                time.sleep(0.5)
            ratios, alone_max, diag_max = [], [], []
            pids = [p.pid for p in ranks]
            for i in range(args.pairs):  # the order alternates, so a drift in load favours neither
                rates, gaps = {}, {}
                for kind in ("alone", "diagnosed") if i % 2 == 0 else ("diagnosed", "alone"):
                    t0 = time.monotonic()
                    if kind == "diagnosed":
                        diagnose(pids, args.in_process)
                    time.sleep(max(0.0, args.window_s - (time.monotonic() - t0)))
                    t1 = time.monotonic()
                    steps, gaps[kind] = steps_between(out, t0, t1)
                    rates[kind] = steps / (t1 - t0)
                ratios.append(rates["diagnosed"] / rates["alone"])
                alone_max.append(gaps["alone"])
                diag_max.append(gaps["diagnosed"])
                print(
                    f"pair {i}: alone {rates['alone']:7.1f} steps/s, diagnosed "
                    f"{rates['diagnosed']:7.1f} steps/s, ratio {ratios[-1]:.3f}",
                    flush=True,
                )
        finally:
            for p in ranks:
                p.kill()
                p.wait()
    cost = 1 - statistics.median(ratios)
    print(
        f"median throughput while diagnosed: {100 * (1 - cost):.1f} % of alone "
        f"(cost {100 * cost:+.1f} %; goal under {100 * GOAL:.0f} %); longest step alone "
        f"{1000 * max(alone_max):.0f} ms, diagnosed {1000 * max(diag_max):.0f} ms"
    )
    print(f"# load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0 if cost <= GOAL else 1


if __name__ == "__main__":
    sys.exit(main())
