"""A job of profiler traces at scale: ``explorer read`` beside HolisticTraceAnalysis, one run.

    python benchmarks/bench_scale_traces.py [--ranks 256 1024] [--repeat 2] [--run DIR]
        [--hta PATH] [--work DIR] [--keep]

The job is one real run of PyTorch's own pipeline runtime under ``torch.profiler`` (``explorer
run --engine torch``: 1F1B, 4 stages, 8 micro-batches, 4 iterations of which 3 are profiled;
recorded here unless ``--run`` names one), its Chrome traces replicated to ``ranks`` by
``tests/replicated_traces.py`` (known offsets, jitter, a slow backward and a slow link planted).
Then, alternating ``--repeat`` times, each in a child process timed by ``wait4`` (wall, CPU of
the child and everything it started, largest resident process):

- ``explorer read JOB --json``: read, folded, outliers named, clocks bounded, step costs;
- ``benchmarks/hta_peer.py JOB``: HolisticTraceAnalysis loads the traces, and pandas compares
  each rank's median action span with its action's median (what an HTA user writes: HTA names
  no slow replica itself, and its time analyses need GPU kernels, which a CPU job has none of).

HTA is not a dependency of the explorer: ``--hta PATH`` is a folder it is installed in (``pip
install --target PATH holistictraceanalysis pandas networkx pydot``), put on the child's path.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import replicated_traces  # noqa: E402  (the generator is test code, shared with tests/pipeline)
from child_time import timed  # noqa: E402  (beside this script)


def record(out: Path, iterations: int = 4) -> Path:
    """A real torch-engine run in ``out`` (PyTorch's runtime under the profiler, 4 ranks on gloo)."""
    cmd = [sys.executable, "-m", "explorer", "run", "--engine", "torch", "--kind", "1f1b"]
    cmd += ["--stages", "4", "--microbatches", "8", "--iterations", str(iterations)]
    subprocess.run([*cmd, "--out", str(out)], check=True, env=_env(), stdout=subprocess.DEVNULL)
    return out


def _env(extra: str = "") -> dict:
    path = [str(REPO), extra, os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[256, 1024])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--run", type=Path, default=None, help="a torch-engine run folder (4 stages)")
    ap.add_argument("--hta", default="", help="a folder HolisticTraceAnalysis is installed in")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-traces-"))
    work.mkdir(parents=True, exist_ok=True)
    run = args.run or record(work / "recorded")
    print(f"# {platform.node()} {os.cpu_count()} cores, python {platform.python_version()}")
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    for ranks in args.ranks:
        job = work / f"traces-{ranks}"
        shutil.rmtree(job, ignore_errors=True)
        t0 = time.perf_counter()
        truth = replicated_traces.replicate_traces(run, job, replicas=ranks // 4, seed=1)
        made = time.perf_counter() - t0
        size = sum(p.stat().st_size for p in job.glob("torch_rank*.json")) / 1e9
        planted = {s.rank for s in truth.stragglers}
        print(f"{ranks} ranks, {size:.2f} GB of traces (written in {made:.0f} s)", flush=True)
        explorer = [sys.executable, "-m", "explorer", "read", str(job), "--json"]
        peer = [sys.executable, str(REPO / "benchmarks" / "hta_peer.py"), str(job)]
        for _ in range(args.repeat):
            text, wall, cpu, peak = timed(explorer, _env())
            doc = json.loads(text)
            named = {o["rank"] for o in doc["outliers"]}
            print(
                f"  explorer read: {wall:.1f} s wall, {cpu:.1f} s CPU, largest process {peak:.0f} MB; "
                f"{doc['instructions']:,} actions; named {sorted(named)} (planted {sorted(planted)})",
                flush=True,
            )
            text, wall, cpu, peak = timed(peer, _env(args.hta))
            got = json.loads(text.strip().splitlines()[-1])
            print(
                f"  HTA + pandas:  {wall:.1f} s wall, {cpu:.1f} s CPU, largest process {peak:.0f} MB; "
                f"load {got['load_s']:.1f} s, {got['spans']:,} spans; slow {got['slow_ranks'][:8]}"
                f"{' ...' if len(got['slow_ranks']) > 8 else ''} ({len(got['slow_ranks'])} ranks)",
                flush=True,
            )
        print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
        if not args.keep:
            shutil.rmtree(job)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
