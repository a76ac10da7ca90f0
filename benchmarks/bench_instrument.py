"""Overhead of ``explorer.instrument`` on a user's DeepSpeed job, through the user's path, and of
the explorer's own engine's trace (timing plus each message's ``p2p`` tuple description).

    .venv/bin/python benchmarks/bench_instrument.py [--iterations 60] [--rounds 2]
        [--engine deepspeed|explorer|both]

Explorer's engine: one real run (1F1B, 4 ranks on gloo, 8 micro-batches of the MLP) whose
timed and untimed iterations alternate (``RunSpec.untimed_iterations``): a timed iteration
times every instruction and describes every send and receive (dtype, shape, requires_grad,
buffer origin) on its line; an untimed one does neither. Medians of the iterations' spans
(rank 0's ``iteration`` lines) are compared, and the in-process cost of one description
is timed beside it.

The user script ``tests/data/deepspeed_user_job.py`` is started by torchrun (4 ranks of
DeepSpeed's real ``PipelineEngine`` on gloo, 8 micro-batches) with ``--alternate``: the same
processes trace every even iteration and run every odd one untraced (``EngineTrace.detach``
gives the engine back its class dispatch table), so both see the same machine state. Rank 0's
``train_batch`` time per iteration is compared: median traced over median untraced, after the
first 4 iterations (warm-up). Goal: at most 2 % more.

A whole-job A/B (one job traced, one not) is printed beside it for reference; on a shared
2-core machine its noise is larger than the effect.

Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "data" / "deepspeed_user_job.py"
WARMUP = 4
GOAL = 0.02


def job(iterations: int, out: str | None, alternate: bool) -> list[float]:
    """Rank 0's seconds per iteration of one torchrun job."""
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "4",
        str(SCRIPT), "--iterations", str(iterations),
    ]  # fmt: skip
    if out:
        cmd += ["--out", out]
    if alternate:
        cmd.append("--alternate")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=True)
    times = []
    for line in done.stdout.splitlines():
        at = line.find('{"iteration"')  # torchrun may prefix a worker's lines with [rank0]:
        if at >= 0:
            times.append(json.loads(line[at:])["seconds"])
    return times


def wrapper_cost_us(n: int = 20000) -> float:
    """Microseconds the tracer adds per instruction: timing, line formatting and writing, in-process."""
    import io
    import time

    from explorer.pipeline.runtime.clock import CpuClock
    from explorer.pipeline.runtime.deepspeed.instrument import EngineTrace

    trace = EngineTrace.__new__(EngineTrace)  # the hot path only: no engine, no process group
    trace.clock = CpuClock()
    trace.stage, trace.rank, trace.run_id, trace.iteration, trace.step = 2, 2, "bench", 0, 0
    trace._pending, trace._lines, trace._written_ns, trace._counters, trace._middles = (
        [],
        [],
        0,
        {},
        {},
    )
    trace._head, trace.t0_ns, trace._fh = (
        '{"type": "instr", ',
        time.perf_counter_ns(),
        io.StringIO(),
    )

    def noop(engine, **kwargs):
        return None

    timed = trace._timed("ForwardPass", noop)
    start = time.perf_counter()
    for _ in range(n):
        noop(None, buffer_id=0)
    base = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(n):
        if i % 8 == 0:
            trace._counters.clear()  # a new iteration every 8 micro-batches
        timed(None, buffer_id=i % 3)
        if i % 2 == 0:
            trace.flush()  # a step ends every two instructions
    trace.flush(force=True)
    return (time.perf_counter() - start - base) / n * 1e6


def explorer_engine(iterations: int) -> tuple[float, float]:
    """Median seconds of rank 0's timed and untimed iterations of one explorer-engine run."""
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.launch import run_pipeline
    from explorer.pipeline.runtime.spec import RunSpec

    spec = RunSpec.for_schedule(
        build("1f1b", 4, 8), iterations=iterations, untimed_iterations=iterations
    )
    with tempfile.TemporaryDirectory() as out:
        result = run_pipeline(spec, out, timeout_s=900)
    if not result.ok or result.details.get("contract"):
        raise SystemExit(f"the benchmark run failed: {result.failure}")
    spans: dict[bool, list[float]] = {True: [], False: []}
    for e in result.details["iterations"]:
        if e["rank"] == 0 and e["iteration"] >= WARMUP:
            spans[e["timed"]].append(e["end"] - e["start"])
    return statistics.median(spans[True]), statistics.median(spans[False])


def describe_cost_us(n: int = 20000) -> float:
    """Microseconds to describe one message (the ``p2p`` field) and write it on its line."""
    import json as _json
    import time

    import torch

    from explorer.pipeline.runtime.p2p import describe

    tensor = torch.zeros(4, 32, requires_grad=True)
    line = {"type": "instr", "iteration": 0, "rank": 0, "stage": 1, "step": 3, "text": "1RA0b0"}
    start = time.perf_counter()
    for _ in range(n):
        _json.dumps(line)
    base = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(n):
        _json.dumps({**line, "p2p": describe((tensor,))})
    return (time.perf_counter() - start - base) / n * 1e6


def main_explorer(iterations: int) -> bool:
    on, off = explorer_engine(iterations)
    overhead = on / off - 1
    per = describe_cost_us()
    print(f"explorer engine, load {os.getloadavg()[0]:.1f}: timed and described {on * 1e3:.3f} ms, "
          f"untimed {off * 1e3:.3f} ms (medians of {iterations - WARMUP // 2} each): overhead "
          f"{overhead:+.2%} (goal <= {GOAL:.0%})")  # fmt: skip
    # 1F1B on 4 stages, 8 micro-batches: a middle rank sends and receives 4 x 8 = 32 messages.
    print(f"describing one message: {per:.2f} us; 32 per rank and iteration: "
          f"{32 * per / 1e3:.3f} ms, {32 * per / 1e3 / (off * 1e3):.2%} of an untimed iteration")  # fmt: skip
    return overhead <= GOAL


def described_cost_us(n: int = 20000) -> float:
    """Microseconds a DeepSpeed send or receive costs over a plain timed instruction: its tuple
    described from the engine's buffers (``pipe_buffers``, ``pipe_recv_buf``, the pool)."""
    import io
    import time
    from types import SimpleNamespace

    import torch

    from explorer.pipeline.runtime.clock import CpuClock
    from explorer.pipeline.runtime.deepspeed.instrument import EngineTrace

    trace = EngineTrace.__new__(EngineTrace)
    trace.clock, trace.iteration, trace.step, trace._pending = CpuClock(), 0, 0, []
    trace._fh = io.StringIO()
    x = torch.zeros(4, 32, requires_grad=True)
    pool = [torch.zeros(4, 32)]
    engine = SimpleNamespace(
        pipe_buffers={"outputs": [x], "inputs": [x]},
        pipe_recv_buf=pool[0],
        grad_layer=pool[0],
        _grad_layer_buf=pool,
    )

    def noop(engine, **kwargs):
        return None

    costs = []
    for name in ("SendActivation", "RecvActivation"):
        plain, described = trace._timed("ForwardPass", noop), trace._timed(name, noop)
        for fn in (plain, described):
            start = time.perf_counter()
            for _ in range(n):
                fn(engine, buffer_id=0)
            costs.append(time.perf_counter() - start)
            trace._pending.clear()
    return (costs[1] - costs[0] + costs[3] - costs[2]) / (2 * n) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--engine", choices=("deepspeed", "explorer", "both"), default="both")
    args = parser.parse_args()
    explorer_met = True
    if args.engine in ("explorer", "both"):
        explorer_met = main_explorer(args.iterations)
        if args.engine == "explorer":
            return 0 if explorer_met else 1
    traced, untraced, whole_on, whole_off = [], [], [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as out:
            times = job(args.iterations, out, alternate=True)
            records = sum(1 for p in Path(out).glob("rank*.jsonl") for _ in open(p))
        traced += [t for i, t in enumerate(times) if i >= WARMUP and i % 2 == 0]
        untraced += [t for i, t in enumerate(times) if i >= WARMUP and i % 2 == 1]
        with tempfile.TemporaryDirectory() as out:
            whole_on += job(args.iterations, out, alternate=False)[WARMUP:]
        whole_off += job(args.iterations, None, alternate=False)[WARMUP:]
    on, off = statistics.median(traced), statistics.median(untraced)
    overhead = on / off - 1
    load = os.getloadavg()[0]
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {load:.1f}"
    )
    print(f"interleaved in one job: traced {on * 1e3:.3f} ms, untraced {off * 1e3:.3f} ms (medians of "
          f"{len(traced)}/{len(untraced)} iterations): overhead {overhead:+.2%} (goal <= {GOAL:.0%})")  # fmt: skip
    print(f"whole jobs: traced {statistics.median(whole_on) * 1e3:.3f} ms, untraced "
          f"{statistics.median(whole_off) * 1e3:.3f} ms per iteration "
          f"({statistics.median(whole_on) / statistics.median(whole_off) - 1:+.2%})")  # fmt: skip
    print(f"trace lines written in the last interleaved job: {records}")
    per = wrapper_cost_us()
    lines_per_iteration = records / (4 * args.iterations / 2)
    print(f"in-process cost per instruction: {per:.2f} us; about {lines_per_iteration:.0f} traced "
          f"instructions per rank and iteration: {per * lines_per_iteration / 1e3:.3f} ms per rank, "
          f"{per * lines_per_iteration / 1e3 / (off * 1e3):.2%} of an untraced iteration")  # fmt: skip
    p2p = described_cost_us()
    print(f"describing a send or receive's tuple: {p2p:.2f} us more per P2P instruction; about "
          f"{lines_per_iteration / 2:.0f} per rank and iteration: "
          f"{p2p * lines_per_iteration / 2 / 1e3 / (off * 1e3):.2%} of an untraced iteration")  # fmt: skip
    met = overhead <= GOAL and explorer_met
    print("goal met" if met else "GOAL MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
