"""Real pipeline benchmark: instrumentation overhead, and simulated versus measured makespan.

    .venv/bin/python benchmarks/bench_pipeline.py [--stages 2] [--width 256] [--iterations 12]

1. Overhead: one run alternates timed and untimed iterations (same processes, same machine
   state); the goal is a median iteration makespan with timing on within 3% of timing off.
2. Simulation error: per schedule, the measured per-instruction costs (median per kind; time
   inside send and receive calls and the P2P latency from matched pairs, in the terms of the
   schedule's P2P model, see ``measured_costs``) go into the simulator; the simulated makespan
   is compared with each measured timed iteration's makespan (median over iterations). Goal:
   within 15%.

Exits 1 when a goal is missed (``make bench`` reports it and goes on).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.recost import measured_costs
from explorer.pipeline.runtime import ModelSpec, RunSpec, run_pipeline
from explorer.pipeline.traces.trace import makespan

SCHEDULES = (
    ("deepspeed legacy", "deepspeed-train", "legacy", "legacy"),
    ("deepspeed fixed", "deepspeed-train", "fixed", "fixed"),
    ("gpipe", "gpipe", None, None),
    ("1f1b", "1f1b", None, None),
)


def _spans(result) -> dict[bool, list[float]]:
    """Per iteration: last end minus first start over ranks, split by timed/untimed."""
    by_it: dict[int, list[dict]] = {}
    for e in result.details["iterations"]:
        by_it.setdefault(e["iteration"], []).append(e)
    out: dict[bool, list[float]] = {True: [], False: []}
    for it, events in sorted(by_it.items()):
        if it < 2:
            continue  # warm-up
        out[events[0]["timed"]].append(
            max(e["end"] for e in events) - min(e["start"] for e in events)
        )
    return out


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stages", type=int, default=2)
    p.add_argument("--microbatches", type=int, default=8)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--iterations", type=int, default=12)
    a = p.parse_args()
    model = ModelSpec("mlp", {"width": a.width, "layers": 8})
    print(
        f"machine: {platform.machine()}, {platform.processor() or 'cpu'}; gloo on CPU, 1 thread per rank; "
        f"MLP width {a.width}, micro-batch {a.batch}; {a.stages} stages x {a.microbatches} micro-batches"
    )

    spec = RunSpec.for_schedule(
        build("1f1b", a.stages, a.microbatches),
        model=model,
        microbatch_size=a.batch,
        iterations=a.iterations,
        untimed_iterations=a.iterations,
    )
    spans = _spans(run_pipeline(spec))
    on, off = statistics.median(spans[True]), statistics.median(spans[False])
    missed = on / off - 1 > 0.03
    print(
        f"overhead: timing on {on * 1e3:.2f} ms, off {off * 1e3:.2f} ms per iteration "
        f"(median of {len(spans[True])}/{len(spans[False])}): {(on / off - 1) * 100:+.1f}% (goal <= 3%)"
    )

    print(f"{'schedule':<18} {'measured ms':>12} {'simulated ms':>13} {'error':>7}")
    for name, kind, buffers, order in SCHEDULES:
        schedule = build(kind, a.stages, a.microbatches, buffers=buffers, order=order)
        result = run_pipeline(
            RunSpec.for_schedule(
                schedule, model=model, microbatch_size=a.batch, iterations=a.iterations
            )
        )
        its = sorted({r["iteration"] for r in result.records})[2:]
        per_it = [[r for r in result.records if r["iteration"] == it] for it in its]
        measured = statistics.median(makespan(rows) for rows in per_it) * 1e3
        costs = measured_costs(
            [r for rows in per_it for r in rows], model=str(schedule.params["p2p"])
        )
        simulated = check(schedule, costs).timeline.makespan
        error = simulated / measured - 1
        missed |= abs(error) > 0.15
        print(
            f"{name:<18} {measured:>12.2f} {simulated:>13.2f} {error * 100:>+6.1f}%   "
            f"send {costs.send:.2f} recv {costs.recv:.2f} p2p {costs.p2p:.2f} F {costs.forward:.2f} B {costs.backward:.2f} ms"
        )
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
