"""The optional scenarios: DeepSpeed's own engine, compiled in place with ``engine.compile()``.

Runs only where the ``deepspeed`` package imports. The engine insists on ``torch.distributed``:
under ``compile-probe --nproc N`` (or the user's torchrun) the group already exists and every
rank builds its engine in it; alone, a single-process gloo group is set up (world size 1,
CPU). ZeRO stage 1 shards optimizer state only; stage 3 also shards the parameters, and its
forward hooks gather and release them around every module, which is what the ``zero3``
preset shows Dynamo's guards and graphs going through. The probe's tracking backend is
handed to ``engine.compile(backend=...)``, which accepts a callable, so variants are counted
exactly as for the plain presets.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

from explorer.compile.runtime.config import CompileConfig, resolve_backend
from explorer.compile.runtime.tracking import VariantTracker
from explorer.errors import require
from explorer.processes import free_port


def _init_single_process() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("gloo", rank=0, world_size=1)


def build_engine_step(
    model: Any, config: CompileConfig, tracker: Optional[VariantTracker], stage: int = 1
) -> tuple[Any, Callable[[int], None]]:
    """A DeepSpeed engine around ``model`` (ZeRO ``stage``, SGD), compiled, and its training step."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    deepspeed = require("deepspeed", "all", "The deepspeed scenario")
    import torch

    # Else deepspeed builds its shared-memory op with g++ (over a minute), which gloo does not use.
    getattr(deepspeed.ops, "__compatible_ops__", {})["deepspeed_shm_comm"] = False
    _init_single_process()
    ds_config = {
        "train_micro_batch_size_per_gpu": 64,
        "zero_optimization": {"stage": stage},
        "zero_allow_untested_optimizer": True,
        "optimizer": {"type": "SGD", "params": {"lr": 1e-3}},
    }
    engine, *_ = deepspeed.initialize(
        model=model, model_parameters=model.parameters(), config=ds_config
    )
    backend: Any = resolve_backend(config.backend)
    if tracker is not None:
        backend = tracker.wrap(backend)
    engine.compile(backend=backend, compile_kwargs=dict(config.kwargs))
    x = torch.randn(64, model.inp.in_features, generator=torch.Generator().manual_seed(0))

    def step(iteration: int) -> None:
        engine.module.mode = iteration % 3
        loss = engine(x).square().mean()
        engine.backward(loss)
        engine.step()

    return engine, step


__all__ = ["build_engine_step"]
