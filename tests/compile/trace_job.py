"""A small real training job that leaves what a user's job leaves: a TORCH_TRACE folder and profiler traces.

Run by the tests in a child process with ``TORCH_TRACE=<out>/torch_trace`` set, so the
structured trace is torch's own; the profiler writes ``<out>/profiler`` through
``tensorboard_trace_handler`` with a ``schedule`` (hence ``ProfilerStep#N``). Every iteration
is an ordinary step of a ``torch.compile``'d module; the ``--job`` picks what goes wrong:

* ``cycling``: ``model.mode`` cycles through 3 values (3 cached variants), with a graph break;
* ``limit``: ``mode`` cycles through 3 values under ``recompile_limit=3`` and the batch grows
  at iteration 8: the fourth compile hits the limit, and the variant whose mode matches
  fails on the size guard, so from then on every iteration runs eagerly;
* ``period4``: nothing recompiles, every 4th iteration sleeps 100 ms (periodic work);
* ``diverge``: under ``torch.distributed`` (gloo), rank 1 alone gets a bigger batch at ``--at``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch._dynamo


class Net(torch.nn.Module):
    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)
        self.mode = 0
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        if self.mode == 1:
            y = y * 2
        elif self.mode == 2:
            y = torch.tanh(y)
        elif self.mode == 3:
            y = y + 1
        if self.graph_break:
            torch._dynamo.graph_break()
        return self.b(y).square().mean()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--job", choices=("cycling", "limit", "period4", "diverge"), required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--at", type=int, default=5)
    args = p.parse_args()
    rank = 0
    if args.job == "diverge":
        import torch.distributed as dist

        dist.init_process_group("gloo")
        rank = dist.get_rank()
    if args.job == "limit":
        torch._dynamo.config.recompile_limit = 3
    torch.manual_seed(0)
    net = Net(graph_break=args.job == "cycling")
    model = torch.compile(net, backend="aot_eager")
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    schedule = torch.profiler.schedule(wait=0, warmup=0, active=args.iterations, repeat=1)
    handler = torch.profiler.tensorboard_trace_handler(os.path.join(args.out, "profiler"))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule,
                                on_trace_ready=handler) as prof:
        for i in range(args.iterations):
            rows = 4
            if args.job == "cycling":
                net.mode = i % 3
            elif args.job == "limit":
                net.mode, rows = i % 3, (4 if i < 8 else 6)
            elif args.job == "diverge" and rank == 1 and i >= args.at:
                rows = 6
            model(torch.randn(rows, 16)).backward()
            opt.step()
            opt.zero_grad()
            if args.job == "period4" and i % 4 == 3:
                time.sleep(0.1)
            if args.job == "diverge":
                dist.barrier()
            prof.step()
    if args.job == "diverge":
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
