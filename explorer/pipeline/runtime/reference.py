"""The reference: the same model trained without a pipeline, on the run's device, and bitwise comparisons with it.

One process runs every stage in order on the same micro-batches, with the same loss scaling,
the same optimizer and the same seed. A pipeline that executes a correct schedule performs
exactly the same floating-point operations in the same order per parameter (gradients
accumulate micro-batch by micro-batch on every stage), so with deterministic algorithms and a
fixed thread count its losses and gradients are *bitwise* equal to these. Anything else - a
buffer that silently fed the wrong micro-batch - shows up as a difference.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from explorer.pipeline.runtime.models import PipelineModel
from explorer.pipeline.runtime.sgd import PlainSGD


@dataclass
class Outcome:
    """Per-iteration, per-micro-batch losses and the final gradients, per stage and parameter."""

    losses: list[list[torch.Tensor]]
    grads: list[list[torch.Tensor]]

    def digest(self) -> str:
        """SHA-256 of every bit of the losses and gradients: equal digests, bitwise equal runs."""
        h = hashlib.sha256()
        for t in [x for row in self.losses for x in row] + [
            g for stage in self.grads for g in stage
        ]:
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        return h.hexdigest()


def train_reference(
    model: PipelineModel,
    iterations: int,
    microbatches: int,
    lr: float = 0.1,
    device: str = "cpu",
) -> Outcome:
    """Train ``model`` (freshly built, all stages) without a pipeline, on ``device``.

    ``device`` is where the pipeline's ranks trained: the same kernels, so the same rounding.
    A GPU's matrix products add in another order than a CPU's, so a CUDA run compared with a
    CPU reference would differ in the last bits while every instruction was right.
    """
    where = torch.device(device)
    full = torch.nn.Sequential(*model.stages).to(where)
    opt = PlainSGD(full.parameters(), lr=lr)  # what the ranks step with
    losses = []
    for it in range(iterations):
        opt.zero_grad(set_to_none=True)
        row = []
        for mb in range(microbatches):
            x, y = model.data_fn(it * microbatches + mb)
            loss = model.loss_fn(full(x.to(where)), y.to(where))
            row.append(loss.detach().cpu().clone())
            (loss * (1.0 / microbatches)).backward()
        opt.step()
        losses.append(row)
    grads = [[_grad(p).cpu() for p in stage.parameters()] for stage in model.stages]
    return Outcome(losses, grads)


def bitwise_equal(a: Outcome, b: Outcome) -> bool:
    """Every loss and every gradient identical to the last bit (``-0.0`` differs from ``0.0``)."""
    pairs = list(zip(_flat(a), _flat(b)))
    return len(_flat(a)) == len(_flat(b)) and all(_same_bits(x, y) for x, y in pairs)


def _flat(o: Outcome) -> list[torch.Tensor]:
    return [x for row in o.losses for x in row] + [g for stage in o.grads for g in stage]


def _same_bits(x: torch.Tensor, y: torch.Tensor) -> bool:
    x, y = x.detach().cpu().contiguous(), y.detach().cpu().contiguous()
    return x.dtype == y.dtype and x.shape == y.shape and x.numpy().tobytes() == y.numpy().tobytes()


def _grad(p: torch.Tensor) -> torch.Tensor:
    return p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p)


__all__ = ["Outcome", "train_reference", "bitwise_equal"]
