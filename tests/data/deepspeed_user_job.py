"""A user's own DeepSpeed pipeline training script, plus the one line that traces it.

Start it as any DeepSpeed job::

    torchrun --nproc-per-node 4 tests/data/deepspeed_user_job.py --out TRACE_DIR
    DS_ACCELERATOR=cpu deepspeed --num_gpus 4 tests/data/deepspeed_user_job.py --out TRACE_DIR

Without ``--out`` the job runs untraced (the overhead benchmark compares the two).
``--legacy-order`` trains with today's buffer count and DeepSpeed 0.8's send/receive order
(the seed thread's combination); ``--pause S`` sleeps between iterations, as a job with real
work per iteration would take time. ``--gate DIR`` is for tests that watch the job live: after
iteration I every rank waits for ``DIR/iteration-I``, and a rank whose ``train_batch`` raised
waits for ``DIR/failure`` before it raises on, so a watcher sees each state while the job is
still running, whatever the machine's load. ``--ids-tuple`` passes a tuple between stages, an
int64 tensor of token ids first and the float activations second (diffusion-pipe #544's shape of
stage tuple), split evenly by layer count. ``--float-mask`` passes ``(activations, mask)``, the
mask a float tensor that needs no gradient (DeepSpeed #5518's shape of stage tuple).
``--varlen`` gives every odd micro-batch one row less (variable lengths, unpadded, without
``dynamic_shape``: DeepSpeed #5729). ``--hang-rank R`` plants a hang in user code: rank R
sleeps for an hour at the start of its third forward pass (a forward pre-hook), so its
neighbours wait on it in their send or receive and the job stops moving mid-iteration.
"""

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("DS_ACCELERATOR", "cpu")

import deepspeed  # noqa: E402
import torch  # noqa: E402
from deepspeed.pipe import PipelineModule  # noqa: E402
from deepspeed.runtime.pipe import schedule  # noqa: E402

import explorer  # noqa: E402

WIDTH, MICRO_BATCHES, MICRO_BATCH_SIZE = 32, 8, 4


class LegacyOrderTrainSchedule(schedule.TrainSchedule):
    """Today's buffers with 0.8's order: receive before sending the gradient, send before receiving."""

    def steps(self):
        for cmds in super().steps():
            names = [type(c).__name__ for c in cmds]
            for first, second in (("SendGrad", "RecvActivation"), ("RecvGrad", "SendActivation")):
                if first in names and second in names:
                    i, j = names.index(first), names.index(second)
                    if i < j:
                        cmds[i], cmds[j] = cmds[j], cmds[i]
                        names[i], names[j] = names[j], names[i]
            yield cmds


def batches(iteration, varlen=False):
    g = torch.Generator().manual_seed(iteration)
    rows = [MICRO_BATCH_SIZE - (varlen and i % 2) for i in range(MICRO_BATCHES)]
    return iter(
        [(torch.randn(n, WIDTH, generator=g), torch.randn(n, WIDTH, generator=g)) for n in rows]
    )


class WithIds(torch.nn.Module):
    """The first layer: (token ids, activations), the ids an int64 tensor of the input's shape."""

    def forward(self, x):
        return (x.abs().mul(10).long() % 7, x)


class IdsBlock(torch.nn.Module):
    """Linear + Tanh on the activations, nudged by the ids; the ids travel on unchanged."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, inputs):
        ids, x = inputs
        return (ids, torch.tanh(self.linear(x) + 0.01 * ids.float()))


def ids_loss(outputs, target):
    return torch.nn.functional.mse_loss(outputs[1], target)


class WithMask(torch.nn.Module):
    """The first layer: (activations, mask), the mask a float tensor computed without a gradient."""

    def forward(self, x):
        return (x, (x > 0).float())


class MaskBlock(torch.nn.Module):
    """Linear + Tanh on the activations, scaled by the mask; the mask travels on unchanged."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(WIDTH, WIDTH)

    def forward(self, inputs):
        x, mask = inputs
        return (torch.tanh(self.linear(x)) * (0.5 + mask), mask)


def mask_loss(outputs, target):
    return torch.nn.functional.mse_loss(outputs[0], target)


def wait_for(gate, name):
    """Wait (at most 300 s) until the watcher creates ``gate/name``; nothing without ``--gate``."""
    if gate is None:
        return
    deadline = time.monotonic() + 300
    while not (Path(gate) / name).exists() and time.monotonic() < deadline:
        time.sleep(0.02)


def hang_in_third_forward(module):
    """A forward pre-hook that sleeps (as user code stuck in a layer would) on the third call."""
    calls = []

    def hook(_module, _inputs):
        calls.append(1)
        if len(calls) == 3:
            time.sleep(3600)  # the planted hang: the neighbours wait on this rank

    module.register_forward_pre_hook(hook)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None, help="trace folder (without it: not traced)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--legacy-order", action="store_true")
    parser.add_argument("--pause", type=float, default=0.0)
    parser.add_argument("--gate", default=None, help="a folder a watcher opens gates in")
    parser.add_argument("--alternate", action="store_true", help="trace even iterations only")
    parser.add_argument(
        "--ids-tuple", action="store_true", help="an int64 tensor in the stage tuple"
    )
    parser.add_argument(
        "--float-mask", action="store_true", help="a float tensor without gradient in the tuple"
    )
    parser.add_argument("--varlen", action="store_true", help="odd micro-batches one row shorter")
    parser.add_argument("--hang-rank", type=int, default=None, help="this rank hangs (see above)")
    parser.add_argument(
        "--stages",
        type=int,
        default=None,
        help="pipeline stages (default: one per rank; fewer: "
        "the job runs WORLD_SIZE / stages data-parallel replicas of the pipeline)",
    )
    parser.add_argument(
        "--local_rank", type=int, default=-1, help="passed by the deepspeed launcher"
    )
    args = parser.parse_args()

    deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
    deepspeed.init_distributed(dist_backend="gloo")
    torch.manual_seed(0)
    if args.ids_tuple or args.float_mask:
        stages = int(os.environ["WORLD_SIZE"])
        first, block, loss_fn = (
            (WithIds, IdsBlock, ids_loss) if args.ids_tuple else (WithMask, MaskBlock, mask_loss)
        )
        layers = [first()] + [block() for _ in range(2 * stages - 1)]
        model = PipelineModule(
            layers=layers, num_stages=stages, loss_fn=loss_fn, partition_method="uniform"
        )
    else:
        layers = [
            torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()) for _ in range(8)
        ]
        model = PipelineModule(
            layers=layers,
            num_stages=args.stages or int(os.environ["WORLD_SIZE"]),
            loss_fn=torch.nn.functional.mse_loss,
        )
    engine, _, _, _ = deepspeed.initialize(
        model=model,
        model_parameters=model.parameters(),
        config={
            "train_micro_batch_size_per_gpu": MICRO_BATCH_SIZE,
            "gradient_accumulation_steps": MICRO_BATCHES,
            "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            "steps_per_print": 1000,
        },
    )
    if args.legacy_order:
        engine._train_schedule = lambda: LegacyOrderTrainSchedule(
            micro_batches=engine.micro_batches, stages=engine.num_stages, stage_id=engine.stage_id
        )

    trace = explorer.instrument(engine, args.out) if args.out else None  # the one line
    if args.hang_rank == engine.global_rank:
        hang_in_third_forward(engine.module)

    for iteration in range(args.iterations):
        if (
            trace is not None and args.alternate
        ):  # the overhead benchmark: traced every other iteration
            trace.attach() if iteration % 2 == 0 else trace.detach()
        start = time.perf_counter()
        try:
            loss = engine.train_batch(data_iter=batches(iteration, args.varlen))
        except BaseException:
            wait_for(args.gate, "failure")
            raise
        took = time.perf_counter() - start
        if engine.global_rank == 0:
            print(
                f"iteration {iteration}: loss {loss.item():.6f} in {took * 1e3:.3f} ms", flush=True
            )
            print(json.dumps({"iteration": iteration, "seconds": took}), flush=True)
        time.sleep(args.pause)
        wait_for(args.gate, f"iteration-{iteration}")


if __name__ == "__main__":
    main()
