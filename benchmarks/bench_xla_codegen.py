"""XLA:CPU code generation at LLVM level 0 (the explorer's default there) against XLA's own level 3.

Each round runs ``explorer xla-run`` (the user's path: the CLI, its launcher and the child) on
the same scenario twice: once as the explorer runs it now, once with ``XLA_FLAGS`` naming
XLA's default level, which the explorer leaves alone (a user's own level wins). Rounds
alternate the two so drift on a shared machine hits both. For each it prints the run's wall
and CPU seconds (the CLI and every process it waited for), the median steady step (steps that
compiled nothing), and whether the two runs gave the same verdict for every step and the same
HLO before optimization for every graph (torch_xla's graph hashes cover ``XLA_FLAGS``, so the
verdicts are compared with the hashes taken out).

    .venv/bin/python benchmarks/bench_xla_codegen.py [--scenario logging] [--steps 6] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from child_time import timed  # noqa: E402

XLA_DEFAULT = "--xla_backend_optimization_level=3"
HASH = re.compile(r"\b[0-9a-f]{8,}\b")


def run(scenario: str, steps: int, layers: int, flags: str, out: Path) -> dict:
    """One ``xla-run``: its wall, CPU, steady step median, verdicts (hashes out) and HLO texts."""
    env = {**os.environ, "XLA_FLAGS": flags}
    cmd = [sys.executable, "-m", "explorer", "xla-run", "--scenario", scenario]
    cmd += ["--steps", str(steps), "--layers", str(layers), "--out", str(out), "--json"]
    text, wall, cpu, _ = timed(cmd, env)
    doc = json.loads(text)
    steady = [s["execute_ms"] for s in doc["steps"] if not s["compiled"]]
    return {
        "wall": wall,
        "cpu": cpu,
        "steady_ms": statistics.median(steady) if steady else float("nan"),
        "verdicts": [HASH.sub("#", s["cause"]) for s in doc["steps"]],
        "hlo": sorted(p.read_text() for p in out.glob("hlo_dump/*before_optimizations.txt")),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="logging")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    variants = {"explorer (LLVM level 0)": "", "XLA's default (level 3)": XLA_DEFAULT}
    seen: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for i, (name, flags) in enumerate(variants.items()):
                r = run(args.scenario, args.steps, args.layers, flags, Path(tmp) / f"{k}-{i}")
                seen[name].append(r)
                print(
                    f"round {k}: {name}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU, "
                    f"steady step {r['steady_ms']:.2f} ms",
                    flush=True,
                )
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"xla-run --scenario {args.scenario} --steps {args.steps} --layers {args.layers}; "
        f"{args.rounds} rounds, alternating"
    )
    medians = {
        name: {key: statistics.median(r[key] for r in runs) for key in ("wall", "cpu", "steady_ms")}
        for name, runs in seen.items()
    }
    for name, m in medians.items():
        print(
            f"{name}: median {m['wall']:.2f} s wall, {m['cpu']:.2f} s CPU, steady step {m['steady_ms']:.2f} ms"
        )
    ours, xla = medians.values()
    print(
        f"XLA's default / the explorer's: {xla['wall'] / ours['wall']:.2f}x wall, "
        f"{xla['cpu'] / ours['cpu']:.2f}x CPU, steady step {xla['steady_ms'] / ours['steady_ms']:.2f}x"
    )
    runs = [r for rs in seen.values() for r in rs]
    same_verdicts = all(r["verdicts"] == runs[0]["verdicts"] for r in runs)
    same_hlo = all(r["hlo"] == runs[0]["hlo"] for r in runs)
    print(f"same verdict at every step: {same_verdicts}; same HLO before optimization: {same_hlo}")
    return 0 if same_verdicts and same_hlo else 1


if __name__ == "__main__":
    sys.exit(main())
