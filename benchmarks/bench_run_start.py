"""What one ``explorer run`` costs, end to end, against another checkout of the explorer.

    .venv/bin/python benchmarks/bench_run_start.py --base /path/to/other/checkout [--rounds 3] [--stages 2]
        [--engine explorer|torch|deepspeed]

Runs the user's command (``python -m explorer run --kind 1f1b --stages 2 --microbatches 2
--iterations 1``; ``--stages 4``: four ranks, micro-batches as many; ``--engine torch`` on PyTorch's engine,
``--engine deepspeed`` DeepSpeed's schedule on DeepSpeed's engine) from this checkout and from
``--base``, alternating, and prints each run's
wall time and the CPU time of the whole process tree (launcher and ranks: the children's
rusage). CPU time is the figure that holds on a shared machine; wall time is what the user
waits. Each checkout runs its own code: the command starts in its folder, which Python puts
first on the path, and the ranks inherit that path.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def command(stages: int, engine: str = "explorer") -> list[str]:
    """The user's command, on ``stages`` ranks with as many micro-batches, on ``engine``."""
    size, kind = str(stages), "deepspeed-train" if engine == "deepspeed" else "1f1b"
    sizes = ["--stages", size, "--microbatches", size, "--iterations", "1"]
    return ["run", "--engine", engine, "--kind", kind, *sizes]


def _one(checkout: Path, out: Path, stages: int, engine: str) -> tuple[float, float]:
    """(wall s, CPU s of the process tree) of one run from ``checkout``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "explorer", *command(stages, engine), "--out", str(out)],
        cwd=checkout,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: explorer run exited {done.returncode}: {done.stderr[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="another checkout to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", type=int, default=2, help="ranks (and micro-batches)")
    parser.add_argument("--engine", choices=("explorer", "torch", "deepspeed"), default="explorer")
    args = parser.parse_args()
    print(f"# {platform.node()} {os.cpu_count()} cores, load {os.getloadavg()}")
    figures: dict[str, list[tuple[float, float]]] = {"this": [], "base": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            for name, checkout in (("base", args.base), ("this", HERE)):
                wall, cpu = _one(checkout, Path(tmp) / f"{name}{i}", args.stages, args.engine)
                figures[name].append((wall, cpu))
                print(f"{name:5s} round {i + 1}: {wall:6.2f} s wall, {cpu:6.2f} s CPU")
    for what, k in (("wall", 0), ("CPU", 1)):
        this = statistics.median(f[k] for f in figures["this"])
        base = statistics.median(f[k] for f in figures["base"])
        print(f"median {what}: this {this:.2f} s, base {base:.2f} s: {base / this:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
