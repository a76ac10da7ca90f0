"""A user's own ``torch.distributed.pipelining`` training job, profiled the way users profile theirs.

Launched by ``torchrun`` in the tests (one process per rank, gloo on CPU). It knows nothing of
the explorer: it builds a small MLP, splits it into stages (rank r holds stages r, r+W, ...),
runs one schedule class for a few iterations under ``torch.profiler`` and exports one Chrome
trace per rank, exactly as a user would before asking ``explorer read`` about it.

Usage: ``torchrun --nproc-per-node W pipelining_job.py OUT SCHEDULE MICROBATCHES [CSV]`` with
SCHEDULE one of ``runtime`` (``_PipelineScheduleRuntime`` running interleaved 1F1B's order, or
the CSV's when given), ``gpipe``, ``1f1b``, ``interleaved``. Several schedules, comma-separated,
run one after another in the same job (as a user compares them), each profiled on its own into
``OUT/SCHEDULE/``.

The one change to PyTorch: in torch 2.9 ``PipelineStage``'s first neighbour handshake sends an
int64 into a float32 receive and gloo aborts; the job skips that handshake per stage.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage
from torch.distributed.pipelining import schedules as S
from torch.profiler import ProfilerActivity, profile

WIDTH, BATCH = 64, 32


def main(out: str, kinds: str, m: int, csv_path: str = "") -> None:
    dist.init_process_group("gloo")
    several = "," in kinds
    for kind in kinds.split(","):
        where = os.path.join(out, kind) if several else out
        os.makedirs(where, exist_ok=True)
        profile_one(where, kind, m, csv_path)
    dist.destroy_process_group()


def profile_one(out: str, kind: str, m: int, csv_path: str) -> None:
    """One schedule: its own stages and model, a warm-up step, then two profiled steps."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    per_rank = 1 if kind in ("gpipe", "1f1b") else 2
    n = world * per_rank
    layers = [torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()) for _ in range(n)]
    mine = [s for s in range(n) if s % world == rank]
    stages = []
    for s in mine:
        stage = PipelineStage(layers[s], s, n, torch.device("cpu"))
        stage._get_init_p2p_neighbors_ops = lambda: []
        stages.append(stage)

    def loss_fn(y, target):
        return torch.nn.functional.mse_loss(y, target)

    if kind == "gpipe":
        sched = S.ScheduleGPipe(stages[0], m, loss_fn=loss_fn)
    elif kind == "1f1b":
        sched = S.Schedule1F1B(stages[0], m, loss_fn=loss_fn)
    elif kind == "interleaved":
        sched = S.ScheduleInterleaved1F1B(stages, m, loss_fn=loss_fn)
    else:
        sched = S._PipelineScheduleRuntime(stages, m, loss_fn=loss_fn)
        if csv_path:
            sched._load_csv(csv_path)
        else:
            order = S.ScheduleInterleaved1F1B(stages, m, loss_fn=loss_fn).pipeline_order
            sched._prepare_schedule_with_comms(
                {r: [a for a in acts if a is not None] for r, acts in order.items()}
            )
    opts = [torch.optim.SGD(layers[s].parameters(), lr=0.01) for s in mine]
    x, target = torch.randn(BATCH, WIDTH), torch.randn(BATCH, WIDTH)

    args = (x,) if 0 in mine else ()
    kwargs = {"target": target} if n - 1 in mine else {}

    def one_step():
        for o in opts:
            o.zero_grad()
        sched.step(*args, **kwargs)
        for o in opts:
            o.step()

    one_step()  # warm-up: shapes are inferred on the first step
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            one_step()
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
    dist.barrier()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *(sys.argv[4:5]))
