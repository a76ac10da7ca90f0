"""The period finder of another revision beside this tree's, on the same seeded series.

``find_time_period`` tries every candidate period up to 64 on a series with none, so a series of
noise is its worst case; the compile explorer calls it on every rank's iterations. This draws
series of 8-300 iterations (the four noise families of ``tests/compile/test_period_evidence.py``,
half of them with a planted period, a few with a NaN), runs both finders on each, alternating,
and fails unless every verdict is the same: a faster finder must not be a different one.

    .venv/bin/python benchmarks/bench_period_ab.py --base f182da0~1 --series 600
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
MODULE = "explorer/compile/analysis/period.py"


def _load(rev: str, scratch: Path) -> ModuleType:
    """The finder's module as it was at ``rev``, loaded under a name of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:{MODULE}"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = scratch / "period_base.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("period_base", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["period_base"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _series(count: int, seed: int) -> list[list[float]]:
    sys.path.insert(0, str(ROOT / "tests" / "compile"))
    from test_period_evidence import _noise  # the tests' own noise families

    rng = random.Random(seed)
    out = []
    for _ in range(count):
        family = rng.choice(["normal", "lognormal", "quantised", "spikes"])
        n = rng.randint(8, 300)
        times = _noise(rng, family, n)
        if rng.random() < 0.5:  # a planted period of 2-9, from a 2 % dip to a 3x spike
            k, effect = rng.randint(2, 9), rng.choice([0.02, 0.1, 0.5, 3.0])
            phase = rng.randrange(k)
            times = [t * (1 + effect) if i % k == phase else t for i, t in enumerate(times)]
        if rng.random() < 0.05:
            times[rng.randrange(n)] = float("nan")
        out.append(times)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare with")
    parser.add_argument("--series", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    from explorer.compile.analysis import period as ours

    with tempfile.TemporaryDirectory() as scratch:
        base = _load(args.base, Path(scratch))
        series = _series(args.series, args.seed)
        cpu: dict[str, list[float]] = {"base": [], "this tree": []}
        verdicts: dict[str, list] = {}
        for _ in range(args.rounds):
            for name, module in (("base", base), ("this tree", ours)):
                start = time.process_time()
                found = [module.find_time_period(list(range(2, len(s) + 2)), s) for s in series]
                cpu[name].append(time.process_time() - start)
                verdicts[name] = [None if f is None else dataclasses.astuple(f) for f in found]
    same = sum(repr(a) == repr(b) for a, b in zip(verdicts["base"], verdicts["this tree"]))
    periods = sum(v is not None for v in verdicts["this tree"])
    for name, seconds in cpu.items():
        print(f"{name:>9}: {', '.join(f'{s:.2f}' for s in seconds)} CPU-s for {len(series)} series")
    print(f"periods found: {periods}; the same verdict on {same} of {len(series)} series")
    ratio = min(cpu["base"]) / min(cpu["this tree"])
    print(f"this tree: {ratio:.2f}x less CPU than {args.base}")
    return 0 if same == len(series) else 1


if __name__ == "__main__":
    sys.exit(main())
