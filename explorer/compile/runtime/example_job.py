"""A small real training job that leaves what a user's job leaves: a TORCH_TRACE folder and profiler traces.

:func:`record` runs it in child processes with ``TORCH_TRACE=<folder>/torch_trace`` set, so
the structured trace is torch's own, while the profiler writes ``<folder>/profiler`` through
``tensorboard_trace_handler`` on a ``schedule`` (hence ``ProfilerStep#N``): exactly what to
add to a job so that ``explorer read`` can answer for it. Every iteration is an ordinary step
of a ``torch.compile``'d module (``aot_eager``, so no C++ compiler is needed); ``job`` picks
what goes wrong:

* ``cycling``: ``model.mode`` cycles through 3 values (3 cached variants), with a graph break;
* ``limit``: ``mode`` cycles through 3 values under ``recompile_limit=3`` and the batch grows
  at iteration 8: the fourth compile hits the limit, and the variant whose mode matches
  fails on the size guard, so from then on every iteration runs eagerly;
* ``period4``: nothing recompiles, every 4th iteration sleeps 100 ms (periodic work);
* ``diverge``: two ranks (gloo); rank 1 alone gets a bigger batch from iteration ``at``.

Run one process by hand as ``python -m explorer.compile.runtime.example_job --job limit --out DIR``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

JOBS = ("cycling", "limit", "period4", "diverge")


def record(
    job: str = "limit",
    folder: Optional[str | Path] = None,
    iterations: int = 12,
    at: int = 5,
    timeout_s: float = 600.0,
) -> Path:
    """Run ``job`` (two ranks for ``diverge``) and return the folder holding its traces."""
    from explorer.errors import InputError
    from explorer.processes import free_port

    if job not in JOBS:
        raise InputError(f"unknown example job {job!r}: choose one of {', '.join(JOBS)}")
    out = Path(folder) if folder else Path(tempfile.mkdtemp(prefix=f"explorer-{job}-job-"))
    out.mkdir(parents=True, exist_ok=True)
    ranks, port = (2 if job == "diverge" else 1), free_port()
    root = str(Path(__file__).resolve().parents[3])
    procs = []
    for rank in range(ranks):
        env = {
            **os.environ,
            "TORCH_TRACE": str(out / "torch_trace"),
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p),
        }
        if job == "diverge":
            env.update(
                RANK=str(rank),
                WORLD_SIZE=str(ranks),
                LOCAL_RANK=str(rank),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
            )
        argv = [
            sys.executable,
            "-m",
            "explorer.compile.runtime.example_job",
            "--job",
            job,
            "--out",
            str(out),
            "--iterations",
            str(iterations),
            "--at",
            str(at),
        ]
        procs.append(
            subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    errors = [p.communicate(timeout=timeout_s)[1] for p in procs]
    bad = [(p.returncode, e) for p, e in zip(procs, errors) if p.returncode != 0]
    if bad:
        raise RuntimeError(f"the example job {job} failed (exit {bad[0][0]}): {bad[0][1][-1500:]}")
    return out


def _model(graph_break: bool) -> Any:
    import torch
    import torch._dynamo

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(16, 16)
            self.b = torch.nn.Linear(16, 16)
            self.mode = 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.a(x))
            if self.mode == 1:
                y = y * 2
            elif self.mode == 2:
                y = torch.tanh(y)
            if graph_break:
                torch._dynamo.graph_break()
            return self.b(y).square().mean()

    return Net()


def run(job: str, out: str, iterations: int, at: int) -> None:
    """The job itself, in this process (see the module docstring)."""
    import time

    import torch
    import torch._dynamo
    import torch._inductor.config
    import torch.distributed as dist

    # Its few small kernels are compiled in this process: a pool of compile workers would import
    # torch again first (seconds of CPU) and compile nothing faster (see run.one_intra_op_thread).
    torch._inductor.config.compile_threads = 1
    rank = 0
    if job == "diverge":
        dist.init_process_group("gloo")
        rank = dist.get_rank()
    if job == "limit":
        torch._dynamo.config.recompile_limit = 3
    torch.manual_seed(0)
    net = _model(graph_break=job == "cycling")
    model = torch.compile(net, backend="aot_eager")
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    schedule = torch.profiler.schedule(wait=0, warmup=0, active=iterations, repeat=1)
    handler = torch.profiler.tensorboard_trace_handler(os.path.join(out, "profiler"))
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], schedule=schedule, on_trace_ready=handler
    ) as prof:
        for i in range(iterations):
            rows = (
                6
                if (job == "limit" and i >= 8) or (job == "diverge" and rank == 1 and i >= at)
                else 4
            )
            net.mode = i % 3 if job in ("cycling", "limit") else 0
            model(torch.randn(rows, 16)).backward()
            opt.step()
            opt.zero_grad()
            if job == "period4" and i % 4 == 3:
                time.sleep(0.1)
            if job == "diverge":
                dist.barrier()
            prof.step()
    if job == "diverge":
        dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--job", choices=JOBS, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--at", type=int, default=5)
    args = p.parse_args()
    run(args.job, args.out, args.iterations, args.at)


if __name__ == "__main__":
    main()

__all__ = ["JOBS", "record", "run", "main"]
