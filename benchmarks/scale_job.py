"""Make a pipeline job of thousands of ranks from one real run: the test data of ``bench_scale``.

    python benchmarks/scale_job.py OUT --replicas 256 [--events 10000] [--run DIR] [--clean]

Without ``--run`` it first records a real run with the explorer's engine (1F1B, 4 stages,
8 micro-batches, 3 iterations on gloo: ``explorer run --out OUT/recorded``); with it, it
replicates that run folder. The job lands in ``OUT/job``: rank ``replica * P + r`` is a copy of
the recorded pipeline rank ``r`` in the engine's own format, with known clock offsets, jitter
and planted stragglers, and ``OUT/job/truth.json`` says which (``tests/replicated_job.py``).
``--clean`` writes the job with no stragglers (jitter and offsets kept).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

import replicated_job  # noqa: E402  (the generator is test code, shared with tests/pipeline)


def record(out: Path, stages: int = 4, microbatches: int = 8, iterations: int = 3) -> Path:
    """A real run of the explorer's engine in ``out`` (a few seconds of process start-up)."""
    cmd = [
        sys.executable,
        "-m",
        "explorer",
        "run",
        "--kind",
        "1f1b",
        "--stages",
        str(stages),
        "--microbatches",
        str(microbatches),
        "--iterations",
        str(iterations),
        "--out",
        str(out),
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument(
        "--replicas", type=int, default=256, help="data-parallel replicas (ranks = P x this)"
    )
    ap.add_argument("--events", type=int, default=None, help="instructions per rank (about)")
    ap.add_argument("--run", type=Path, default=None, help="a recorded run folder to replicate")
    ap.add_argument("--clean", action="store_true", help="plant no stragglers")
    ap.add_argument("--from-iteration", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    run = args.run or record(args.out / "recorded")
    t0 = time.perf_counter()
    try:
        truth = replicated_job.replicate(
            run,
            args.out / "job",
            args.replicas,
            events=args.events,
            stragglers=[] if args.clean else None,
            from_iteration=args.from_iteration,
            seed=args.seed,
        )
    except ValueError as exc:  # a run that cannot be replicated: one line, as the CLI says it
        print(f"scale_job: error: {exc}", file=sys.stderr)
        return 2
    took = time.perf_counter() - t0
    print(
        f"{truth.pipeline_ranks * truth.replicas} ranks ({truth.replicas} replicas of {truth.stages} "
        f"stages), {truth.iterations} iterations each, in {args.out / 'job'} ({took:.1f} s); "
        f"planted: {', '.join(f'rank {s.rank} {s.kind}' for s in truth.stragglers) or 'none'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
