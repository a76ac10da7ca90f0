"""One rank of a real pipeline run: the process that ``torchrun`` or the launcher starts.

Reads ``RANK``/``WORLD_SIZE``/``LOCAL_RANK``/``MASTER_ADDR``/``MASTER_PORT`` like any
``torch.distributed`` program, and the run's ``spec.json`` from the run folder. Every rank builds
the whole model from the same seed, keeps its stages, runs its stream, and appends its trace to
``rank<R>.jsonl``. At the end rank 0 gathers the losses and gradients, trains the reference
(:mod:`.reference`) and writes ``result.json`` (:mod:`.result_writer`, shared with PyTorch's engine).

A rank that fails writes a ``failure`` line (a :class:`~explorer.failure.Failure`: step,
instruction, kind, message, traceback tail), keeps
everything it measured, and exits 1 at once (``os._exit``: a process group whose peer is gone
must not hang in its destructor). Usage: ``python -m explorer.pipeline.runtime.worker RUN_DIR``.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Optional

from explorer.processes.orphan import end_with_launcher

end_with_launcher()  # first: a rank whose launcher is gone must not run on into its folder

import torch
import torch.distributed as dist

from explorer.failure import Failure, FailureKind, from_exception
from explorer.pipeline.runtime.clock import clock_for
from explorer.pipeline.runtime.determinism import gpu_index, prepare_rank
from explorer.pipeline.runtime.executor import InstructionFailed, RankExecutor, classify
from explorer.pipeline.runtime.models import build_model
from explorer.pipeline.runtime.p2p import Channels, open_directions
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.runtime.result_writer import write_result
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.stage_state import StageState


def main(folder: Path) -> int:
    """Run this process's rank of the run in ``folder``; returns the exit code."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    spec = RunSpec.read(folder)
    recorder = Recorder(folder, rank, spec.run_id)
    try:
        return _run(rank, world, spec, folder, recorder)
    except InstructionFailed as exc:
        recorder.flush_before_failure()  # what it measured first: the failure line follows regardless
        recorder.failure(
            from_exception(
                exc.__cause__ or exc,
                FailureKind(exc.cause),
                message=str(exc),
                stage=exc.instruction.stage,
                step=exc.step,
                instruction=exc.instruction.deepspeed_repr(),
            ),
            text=str(exc.instruction),
        )
    except BaseException as exc:  # setup failures (model, rendezvous) are still this rank's story
        recorder.failure(outside_instructions(exc), text=None, collective=collective_of(exc))
    recorder.close()
    sys.stdout.flush()
    os._exit(1)


def outside_instructions(exc: BaseException) -> Failure:
    """A failure outside the schedule's instructions (set-up, the barrier that starts each
    iteration, the final gather), kind as an instruction's would be: a neighbour that died while
    this rank waited in the barrier is a lost peer (its consequence, so the verdict looks for the
    rank that went), not this rank's own error."""
    lost_peer = classify(exc) == "peer"
    return from_exception(exc, FailureKind.PEER if lost_peer else FailureKind.ERROR)


def collective_of(exc: BaseException) -> Optional[str]:
    """The torch.distributed call ``exc`` came out of (``barrier``, ``gather_object``), the
    outermost frame of ``distributed_c10d`` in its traceback; None when it came from none. The
    doctor reads it as the collective the rank waited in when its neighbour went."""
    calls = [
        frame.f_code.co_name
        for frame, _ in traceback.walk_tb(exc.__traceback__)
        if frame.f_code.co_filename.endswith("distributed_c10d.py")
    ]
    return calls[0] if calls else None


def _device(spec: RunSpec) -> torch.device:
    if spec.device == "cpu":
        return torch.device("cpu")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    return torch.device("cuda", gpu_index(local, torch.cuda.device_count()))


def _run(rank: int, world: int, spec: RunSpec, folder: Path, recorder: Recorder) -> int:
    prepare_rank(spec.backend, spec.device, spec.threads)
    device = _device(spec)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    schedule = spec.build_schedule()
    if world != schedule.num_ranks:
        raise RuntimeError(f"the schedule has {schedule.num_ranks} ranks but WORLD_SIZE is {world}")
    dist.init_process_group(
        spec.backend,
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=spec.stall_timeout_s),
        device_id=device if spec.backend == "nccl" else None,
    )
    model = build_model(spec.model, schedule.num_stages, spec.microbatch_size, spec.seed)
    boundaries = _boundaries(model)
    mine = schedule.stages_of_rank(rank)
    states = {
        s: StageState(
            s,
            model.stages[s].to(device),
            schedule.buffers[s],
            first=s == 0,
            last=s == schedule.num_stages - 1,
            loss_fn=model.loss_fn,
            num_microbatches=schedule.num_microbatches,
        )
        for s in mine
    }
    channels = Channels(
        rank,
        schedule.stage_to_rank,
        boundaries,
        blocking=schedule.params.get("p2p") == "blocking",
        device=device,
        via_host=spec.backend == "gloo" and device.type == "cuda",
        # NCCL pairs by communicator and order, not by tag: one communicator per direction
        # (untagged runs keep one channel per rank pair on purpose: see RunSpec.p2p_tags).
        groups=open_directions(schedule.stage_to_rank)
        if spec.backend == "nccl" and spec.p2p_tags
        else None,
        tagged=spec.p2p_tags,
        pooled=spec.recv_pool,
    )
    executor = RankExecutor(
        rank, schedule, states, channels, model.data_fn, device, recorder, spec.fault
    )
    dist.barrier()
    clock = clock_for(device.type)
    recorder.start(
        mine,
        clock.base_ns,
        clock,
        device=str(device),
        backend=spec.backend,
        unix=time.time(),
    )
    losses: list[list[torch.Tensor]] = []
    for it, timed in enumerate(_pattern(spec)):
        dist.barrier()
        start = time.perf_counter_ns()
        executor.run(it, clock=clock if timed else None)
        if timed:
            recorder.flush()  # the marks still pending on a GPU: one wait per iteration
        if device.type == "cuda":
            torch.cuda.synchronize()
        recorder.event(
            "iteration",
            iteration=it,
            timed=timed,
            start=recorder.seconds(start),
            end=recorder.seconds(time.perf_counter_ns()),
        )
        last = states.get(schedule.num_stages - 1)
        if last is not None:
            losses.append([last.losses[m].cpu() for m in sorted(last.losses)])
    grads = {s: [_cpu_grad(p) for p in states[s].module.parameters()] for s in mine}
    gathered: list | None = [None] * world if rank == 0 else None
    dist.gather_object({"losses": losses, "grads": grads}, gathered, dst=0)
    if gathered is not None:  # rank 0, where the gather lands
        write_result(
            folder / "result.json",
            spec,
            schedule.num_stages,
            schedule.num_microbatches,
            gathered,
            len(_pattern(spec)),
            device=str(device),
        )
    recorder.event("done")
    recorder.close()
    dist.destroy_process_group()
    return 0


def _pattern(spec: RunSpec) -> list[bool]:
    """Timed and untimed iterations, interleaved, so both see the same machine conditions."""
    timed, untimed = [True] * spec.iterations, [False] * spec.untimed_iterations
    out: list[bool] = []
    while timed or untimed:
        for queue in (timed, untimed):
            if queue:
                out.append(queue.pop())
    return out


def _boundaries(model) -> list[tuple[torch.Size, torch.dtype]]:
    """Shape and dtype entering each stage (index s), from one no-grad pass over micro-batch 0."""
    x, _ = model.data_fn(0)
    out = [(x.shape, x.dtype)]
    with torch.no_grad():
        for stage in model.stages:
            x = stage(x)
            if not isinstance(x, torch.Tensor):
                raise TypeError(
                    f"a stage returned {type(x).__name__}: stages must pass one tensor to the next"
                )
            out.append((x.shape, x.dtype))
    return out


def _cpu_grad(p: torch.Tensor) -> torch.Tensor:
    return (
        p.grad.detach().cpu().clone() if p.grad is not None else torch.zeros_like(p, device="cpu")
    )


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))

__all__ = ["main"]
