"""Probe overhead per iteration after warm-up, against the same loop unprobed, in one run.

Two identical compiled models (aot_eager by default, so the loop is cheap and any probe cost
shows), warmed up, then timed in alternating rounds: one round of N bare iterations, one round
of N iterations under :func:`probe` with the tracking backend (metrics source, cache reads).
Alternating rounds cancel drift on a shared machine; the medians of the rounds are compared.
The probe's own bookkeeping is also timed alone (a step that does nothing), which stays
readable when other jobs make the machine too noisy for the side-by-side ratio.
Goal: overhead <= 5%.

    .venv/bin/python benchmarks/bench_compile_probe.py [--backend aot_eager] [--iterations 100] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="aot_eager")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()

    import torch

    from explorer.compile.runtime.config import parse_config
    from explorer.compile.runtime.probe import probe
    from explorer.compile.runtime.tracking import VariantTracker
    from explorer.compile.runtime.wrapper import compile_model

    torch.manual_seed(0)
    torch._dynamo.reset()
    tracker = VariantTracker()
    model = compile_model(
        torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.GELU(), torch.nn.Linear(256, 256)),
        parse_config({"backend": args.backend}),
        tracker,
    )
    opt = torch.optim.SGD(model.module.parameters(), lr=1e-3)
    x = torch.randn(64, 256)

    def step(_i: int) -> None:
        model(x).square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for i in range(20):
        step(i)
    bare, probed = [], []
    for _ in range(args.rounds):
        start = time.perf_counter()
        for i in range(args.iterations):
            step(i)
        bare.append((time.perf_counter() - start) / args.iterations * 1e3)
        start = time.perf_counter()
        result = probe(step, args.iterations, tracker=tracker, reset=False)
        probed.append((time.perf_counter() - start) / args.iterations * 1e3)
        assert not any(it.compiled for it in result.iterations), "the warm loop recompiled"
    b, p = statistics.median(bare), statistics.median(probed)
    empty = []
    for _ in range(args.rounds):  # the probe's own bookkeeping: a step that does nothing
        start = time.perf_counter()
        probe(lambda _i: None, args.iterations, tracker=tracker, reset=False)
        empty.append((time.perf_counter() - start) / args.iterations * 1e3)
    e = statistics.median(empty)
    print(
        f"backend {args.backend}, {args.iterations} iterations x {args.rounds} rounds, torch {torch.__version__}"
    )
    print(f"bare    {b:.4f} ms/iteration (median of rounds)")
    print(f"probed  {p:.4f} ms/iteration (median of rounds, incl. diagnosis)")
    print(f"overhead {100 * (p - b) / b:+.2f}%  (goal <= 5%)")
    print(
        f"bookkeeping {e * 1e3:.1f} us/iteration with an empty step = {100 * e / b:.2f}% of a bare iteration"
    )
    print(f"overhead of the fastest rounds {100 * (min(probed) - min(bare)) / min(bare):+.2f}%")


if __name__ == "__main__":
    main()
