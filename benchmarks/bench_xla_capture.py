"""Capture overhead per XLA step after the compiles, against the same loop without capture, in one run.

The same preset (``steady``: nested FSDP encoder, SGD with momentum) runs in child processes
with capture on (``PT_XLA_DEBUG_LEVEL=2`` debug blocks, ``XLA_IR_DEBUG``/``XLA_HLO_DEBUG``
source lines, ``--xla_dump_to`` HLO, compile counters and metrics, one ``stat`` per step) and
off (none of it), and with capture but without the source lines. Steps that compiled are
excluded; the medians of the remaining step wall times are compared. Rounds alternate the
three variants so drift on a shared machine hits all of them. Goal: overhead <= 10%. Exits 1
when the default capture misses it.

    .venv/bin/python benchmarks/bench_xla_capture.py [--steps 150] [--pairs 3] [--layers 2]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys


def _steady_ms(run, skip: int) -> list[float]:
    return [s.wall_ms for s in run.steps[skip:]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--width", type=int, default=32)
    args = parser.parse_args()

    from explorer.xla.runtime import run_scenario

    skip = 3  # steps 0 and 1 compile; step 2 is the first cached one (allocator warm-up)
    default_name = "capture (default: source lines until settled)"
    variants = {
        "without capture": {"capture": False},
        default_name: {},
        "capture with source lines on every step": {"lines_settle": 0},
        "capture without source lines": {"source_lines": False},
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for k in range(args.pairs):
        for name, options in variants.items():
            run = run_scenario(
                "steady", steps=args.steps, layers=args.layers, width=args.width, **options
            )
            if not run.ok:
                print(f"run failed: {run.failure.message}", file=sys.stderr)
                return 2
            late = [s.step for s in run.steps[skip:] if s.compiled]
            if late:
                print(
                    f"steps {late} compiled after warm-up: the comparison would include compiles",
                    file=sys.stderr,
                )
                return 2
            times[name] += _steady_ms(run, skip)
            print(
                f"round {k}: {name}: median {statistics.median(_steady_ms(run, skip)):.2f} ms/step",
                flush=True,
            )
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; model: encoder {args.layers} layers, "
        f"width {args.width}; {args.steps} steps per run, {args.pairs} rounds, first {skip} steps excluded"
    )
    base = statistics.median(times["without capture"])
    verdict = {}
    for name, values in times.items():
        m = statistics.median(values)
        verdict[name] = m / base - 1
        print(
            f"{name}: median {m:.2f} ms/step"
            + ("" if name == "without capture" else f", overhead {verdict[name]:+.1%}")
        )
    default = verdict[default_name]
    print(
        f"goal <= 10%: default capture {'met' if default <= 0.10 else 'NOT met'} ({default:+.1%})"
    )
    return 0 if default <= 0.10 else 1


if __name__ == "__main__":
    sys.exit(main())
