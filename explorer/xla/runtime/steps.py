"""Build the preset steps in the child: each is a ``step(step_index) -> None`` on the XLA device.

The presets are ordinary user steps (what ``--step MODULE:FUNCTION`` loads), sharing one
small FSDP-wrapped encoder trained with SGD and momentum. Each one changes a single thing from
step to step, so the recompile it causes has one cause the HLO diff can name.
"""

from __future__ import annotations

from typing import Any, Callable

from explorer.xla.runtime.config import RunConfig
from explorer.xla.runtime.models import VOCAB, build_encoder, wrap_v1, wrap_v2

StepFn = Callable[[int], None]

#: Step at which ``shape-change`` lengthens the sequence, and by how much.
SHAPE_CHANGE_AT, SHAPE_GROWTH = 3, 4
#: ``logging`` keeps a gradient norm on steps where ``step % LOG_EVERY == LOG_EVERY - 1``.
LOG_EVERY = 3
#: ``scalar``'s loss weights: the auxiliary weight equals the main one on odd steps.
MAIN_WEIGHT, AUX_WEIGHTS = 0.7, (0.3, 0.7)


class Trainer:
    """The encoder, its optimizer and fixed batches, on the XLA device; ``train`` runs one step."""

    def __init__(self, cfg: RunConfig) -> None:
        import torch
        import torch_xla
        import torch_xla.runtime as xr

        self.torch = torch
        torch.manual_seed(cfg.seed)
        self.device = torch_xla.device()
        on_cpu = cfg.pjrt_device == "CPU"
        model = build_encoder(torch, cfg)
        self.mesh = None
        if cfg.fsdp == "v2":
            self.model, self.mesh = wrap_v2(model, cfg, self.device)
            wrapper = f"SpmdFullyShardedDataParallel (SPMD FSDPv2, nested), {xr.global_runtime_device_count()} devices"
            workarounds: list[str] = []
        else:
            self.model, workarounds = wrap_v1(model, cfg, self.device, on_cpu)
            wrapper = f"XlaFullyShardedDataParallel (nested), world size {xr.world_size()}"
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.cfg = cfg
        self.info = {
            "wrapper": wrapper,
            "workarounds": workarounds,
            "reduce_scatter_bucket_size_mb": cfg.bucket_mb if cfg.fsdp == "v1" else None,
            "model": f"encoder, {cfg.layers} layers, width {cfg.width}, batch {cfg.batch}x{cfg.seq}",
            "parameters": sum(p.numel() for p in model.parameters()),
        }
        self._batches: dict[int, Any] = {}

    def batch(self, seq: int) -> Any:
        """A fixed batch of token ids with sequence length ``seq`` (made once per length)."""
        if seq not in self._batches:
            gen = self.torch.Generator().manual_seed(seq)
            ids = self.torch.randint(0, VOCAB, (self.cfg.batch, seq), generator=gen).to(self.device)
            if self.mesh is not None:
                import torch_xla.distributed.spmd as xs

                xs.mark_sharding(ids, self.mesh, ("fsdp", None))
            self._batches[seq] = ids
        return self._batches[seq]

    def train(
        self, seq: int, aux_weight: float = 0.0, after_backward: Callable[[], None] | None = None
    ) -> Any:
        """Forward, masked-LM loss (plus an optional auxiliary term), backward, optimizer step.

        ``after_backward`` runs between backward and the optimizer step, where FSDP's
        reduce-scatter callbacks would run.
        """
        F = self.torch.nn.functional
        ids = self.batch(seq)
        self.optimizer.zero_grad()
        logits = self.model(ids)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), ids.reshape(-1)) * MAIN_WEIGHT
        if aux_weight:
            loss = loss + logits.pow(2).mean() * aux_weight
        loss.backward()
        if after_backward is not None:
            after_backward()
        self.optimizer.step()
        return loss


def build(cfg: RunConfig) -> tuple[StepFn, dict[str, Any]]:
    """The preset step for ``cfg`` and what it runs on (a user's ``--step`` is loaded by the
    child itself, before torch_xla)."""
    trainer = Trainer(cfg)
    seq = cfg.seq
    name = cfg.scenario

    if name in ("steady", "bucketed-nested"):

        def step(i: int) -> None:
            trainer.train(seq)
    elif name == "logging":
        logged: list[Any] = []

        def step(i: int) -> None:
            trainer.train(seq)
            if i % LOG_EVERY == LOG_EVERY - 1:
                grads = [p.grad for p in trainer.model.parameters() if p.grad is not None]
                norms = trainer.torch.stack([trainer.torch.linalg.vector_norm(g) for g in grads])
                logged.append(trainer.torch.linalg.vector_norm(norms))
    elif name == "scalar":

        def step(i: int) -> None:
            trainer.train(seq, aux_weight=AUX_WEIGHTS[i % 2])
    elif name == "deferred-callbacks":
        step = _deferred_callbacks(trainer, seq)
    elif name == "shape-change":

        def step(i: int) -> None:
            trainer.train(seq + (SHAPE_GROWTH if i >= SHAPE_CHANGE_AT else 0))
    else:  # RunConfig.resolved() rejects unknown names first
        raise ValueError(f"no step builder for scenario {name!r}")
    return step, trainer.info


def _deferred_callbacks(trainer: Trainer, seq: int) -> StepFn:
    """Queue one callback per gradient; run the whole queue once more than a step's worth waits.

    Like FSDP's bucketed reduce-scatter callbacks, a queued callback holds its gradient (a live
    tensor) until the bucket is flushed, here one step later; the flush adds every queued
    gradient's norm to a running total that lives across steps. So the steps alternate: one
    syncs with a step's gradients still queued (live, so they are graph outputs), the next
    flushes two steps' worth, and the first flush has no total to add to yet.
    """
    torch = trainer.torch
    queue: list[Any] = []
    state: dict[str, Any] = {"total": None}
    params = list(trainer.model.parameters())

    def defer() -> None:
        queue.extend(p.grad * 1.0 for p in params if p.grad is not None)
        if len(queue) > len(params):
            flushed = torch.stack([torch.linalg.vector_norm(g) for g in queue]).sum()
            total = state["total"]
            state["total"] = flushed if total is None else total + flushed
            queue.clear()

    def step(i: int) -> None:
        trainer.train(seq, after_backward=defer)

    return step


__all__ = ["StepFn", "LOG_EVERY", "Trainer", "build"]
