"""One rank of ``explorer run --engine deepspeed``: DeepSpeed's own ``PipelineEngine``, traced.

Started by the explorer's launcher (:mod:`explorer.pipeline.runtime.launch`) exactly like the
explorer's worker, with the run folder as its argument and the torchrun environment. It builds
the model from the run's :class:`~explorer.pipeline.runtime.spec.RunSpec` (one
``nn.Sequential`` per stage, so DeepSpeed's uniform partition keeps the explorer's split),
wraps it in a ``PipelineModule``, starts the engine (gloo on CPU by default, NCCL with a GPU per
rank; fp32, ZeRO 0, SGD: nothing that needs a compiled op), hands it the schedule through its ``_train_schedule`` hook (the
explorer's schedule replayed, or the user's class with its instructions mapped onto today's)
and traces it with :func:`explorer.instrument`, the same tracer a user puts in their own job.

At the end rank 0 gathers the losses (captured in the loss function) and the gradients (taken
just before the last optimizer step, which zeroes them), trains the reference and writes
``result.json`` as the explorer's worker does. A rank whose engine raises has its failure line
written by the tracer and exits 1 at once; with the ``linger`` fault it stays alive instead, as
a job that swallows the error would, and the launcher must still end every rank.

Usage: ``python -m explorer.pipeline.runtime.deepspeed.worker RUN_DIR``.
"""

from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

from explorer.processes.orphan import end_with_launcher

end_with_launcher()  # first: a rank whose launcher is gone must not run on into its folder

if os.environ.get("DS_ACCELERATOR"):
    # What every rank imports, imported with this module: on CPU the ranks fork from one template
    # that imported it (:mod:`explorer.processes.template`), so it is paid once per run, not once
    # per rank (about 3 s of CPU each). Only once the launcher has named DeepSpeed's accelerator,
    # which DeepSpeed picks at import; Dynamo because ``torch.optim`` imports it when DeepSpeed
    # builds the optimizer (torch 2.9).
    import deepspeed  # noqa: F401
    import torch._dynamo  # noqa: F401
    import torch.distributed  # noqa: F401


def main(folder: Path) -> int:
    """Run this process's rank of the DeepSpeed run in ``folder``; returns the exit code."""
    from explorer.pipeline.runtime.recorder import Recorder
    from explorer.pipeline.runtime.spec import RunSpec

    rank = int(os.environ["RANK"])
    spec = RunSpec.read(folder)
    # A rank started without the launcher's DS_ACCELERATOR (by hand) imports DeepSpeed only
    # below: name its accelerator first, it is chosen at import (cuda: NCCL, a GPU per rank).
    os.environ.setdefault("DS_ACCELERATOR", "cpu" if spec.device == "cpu" else "cuda")
    trace = None
    try:
        trace = _Run(spec, folder, rank)
        return trace.run()
    except BaseException as exc:
        if trace is None or trace.tracer is None:  # failed before the tracer existed: setup
            from explorer.failure import FailureKind, from_exception

            unsupported = type(exc).__name__ == "UnsupportedDeepSpeed"
            recorder = Recorder(folder, rank, spec.run_id)
            recorder.failure(
                from_exception(exc, FailureKind.UNSUPPORTED if unsupported else FailureKind.ERROR),
                text=None,
            )
            recorder.close()
        elif not trace.tracer.failed:
            trace.tracer._failure(None, exc)
        if spec.fault is not None and spec.fault.how == "linger" and spec.fault.rank == rank:
            time.sleep(3600)  # a rank that keeps running after its error
    sys.stdout.flush()
    os._exit(1)


class _Run:
    """The engine of one rank and what it needs to train and report."""

    def __init__(self, spec: Any, folder: Path, rank: int) -> None:
        self.spec, self.folder, self.rank = spec, folder, rank
        self.tracer = None

    def run(self) -> int:
        import deepspeed
        import torch
        import torch.distributed as dist

        from explorer.pipeline.runtime.deepspeed.guard import require_installed
        from explorer.pipeline.runtime.deepspeed.instrument import instrument
        from explorer.pipeline.runtime.models import build_model

        spec, rank = self.spec, self.rank
        version, engine_class, ds_schedule = require_installed()
        # Else the first init_distributed builds an inference-only shared-memory op with g++.
        getattr(deepspeed.ops, "__compatible_ops__", {})["deepspeed_shm_comm"] = False
        from explorer.pipeline.runtime.determinism import gpu_index, prepare_rank

        prepare_rank(spec.backend, spec.device, spec.threads)
        device = torch.device("cpu")
        if spec.device == "cuda":  # as the explorer's worker: more ranks than GPUs share them
            local = int(os.environ.get("LOCAL_RANK", "0"))
            device = torch.device("cuda", gpu_index(local, torch.cuda.device_count()))
            torch.cuda.set_device(device)
        schedule = spec.build_schedule()
        stages, micro = schedule.num_stages, schedule.num_microbatches
        world = int(os.environ["WORLD_SIZE"])
        if world != stages:
            raise RuntimeError(f"the schedule has {stages} stages but WORLD_SIZE is {world}")
        deepspeed.init_distributed(
            dist_backend=spec.backend,
            timeout=datetime.timedelta(seconds=spec.stall_timeout_s),
        )
        model = build_model(spec.model, stages, spec.microbatch_size, spec.seed)
        self.losses: list[list[torch.Tensor]] = []
        row: list[torch.Tensor] = []

        def loss_fn(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            loss = model.loss_fn(output, target)
            row.append(loss.detach().cpu().clone())
            return loss

        from deepspeed.pipe import PipelineModule
        from deepspeed.runtime.pipe.engine import PipelineEngine

        module = PipelineModule(
            layers=list(model.stages),
            num_stages=stages,
            loss_fn=loss_fn,
            partition_method="uniform",
        )
        config = {
            "train_micro_batch_size_per_gpu": spec.microbatch_size,
            "gradient_accumulation_steps": micro,
            "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
            "zero_optimization": {"stage": 0},
            "steps_per_print": 10**9,
            "wall_clock_breakdown": False,
        }
        # No model_parameters: DeepSpeed then takes the module's (its own annotation of that
        # argument names a Module where it takes an iterable of parameters).
        engine, *_ = deepspeed.initialize(model=module, config=config)
        assert isinstance(engine, PipelineEngine)  # what DeepSpeed makes of a PipelineModule
        stage = engine.stage_id
        engine._train_schedule = self._schedule_hook(ds_schedule, schedule, stage, micro)
        grads: list[torch.Tensor] = []
        take_step = engine._take_model_step

        def step_keeping_grads(*args: Any, **kwargs: Any) -> Any:
            grads[:] = [
                p.grad.detach().cpu().clone()
                if p.grad is not None
                else torch.zeros_like(p, device="cpu")
                for p in model.stages[stage].parameters()
            ]
            return take_step(*args, **kwargs)

        engine._take_model_step = step_keeping_grads
        self._fault(engine, stage)
        self.tracer = instrument(engine, self.folder, run_id=spec.run_id)
        for it in range(spec.iterations):
            row.clear()
            data = iter([model.data_fn(it * micro + mb) for mb in range(micro)])
            engine.train_batch(data_iter=data)
            self.losses.append(list(row))
        gathered: Optional[list] = [None] * world if rank == 0 else None
        dist.gather_object(
            {"losses": self.losses if stage == stages - 1 else [], "grads": {stage: grads}},
            gathered,
            dst=0,
        )
        if gathered is not None:  # rank 0, where the gather lands
            from explorer.pipeline.runtime.result_writer import write_result

            write_result(
                self.folder / "result.json",
                spec,
                stages,
                micro,
                gathered,
                spec.iterations,
                device=str(device),
            )
        self.tracer.close()
        dist.destroy_process_group()
        return 0

    def _schedule_hook(self, ds_schedule: Any, schedule: Any, stage: int, micro: int) -> Any:
        """The engine's ``_train_schedule``: the user's class (mapped) or the explorer's schedule (replayed)."""
        from explorer.pipeline.runtime.deepspeed.schedules import MappedSchedule, replay

        if self.spec.schedule_class:
            from explorer.pipeline.schedules.adapters import load_class

            cls = load_class(self.spec.schedule_class)
            return lambda: MappedSchedule(
                cls(micro_batches=micro, stages=schedule.num_stages, stage_id=stage), ds_schedule
            )
        return lambda: replay(ds_schedule, schedule, stage, micro)

    def _fault(self, engine: Any, stage: int) -> None:
        """An injected fault (tests, demos): at ``fault.step`` of iteration 0 this rank raises."""
        fault = self.spec.fault
        if fault is None or fault.rank != self.rank:
            return
        table = dict(type(engine)._INSTRUCTION_MAP)

        def faulty(fn: Any) -> Any:
            def run(eng: Any, **kwargs: Any) -> Any:
                tracer = self.tracer
                if tracer is not None and tracer.iteration == 0 and tracer.step == fault.step:
                    raise RuntimeError(f"injected fault on rank {self.rank} at step {fault.step}")
                return fn(eng, **kwargs)

            return run

        # The tracer copies the class's table when it installs: the fault is inside its timing.
        type(engine)._INSTRUCTION_MAP = {cls: faulty(fn) for cls, fn in table.items()}


__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
