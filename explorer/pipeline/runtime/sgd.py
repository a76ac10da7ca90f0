"""The optimizer step of the explorer's engine and of its reference: plain SGD, written out.

``torch.optim.SGD`` with these settings (no momentum, weight decay, dampening or Nesterov)
updates each parameter by ``param.add_(grad, alpha=-lr)``: one tensor at a time on a CPU, all
at once through ``torch._foreach_add_`` on a GPU. What it also does is import Dynamo the first
time an optimizer is built (``torch.optim.Optimizer`` is wrapped by ``torch._disable_dynamo``):
1.2 to 1.5 s of CPU in every rank of every run, before the rank joins its group. The engine
and its reference both step with this class, so the two sides of the bitwise comparison still
do the same arithmetic; ``tests/pipeline/test_sgd_step.py`` holds its steps bitwise equal to
``torch.optim.SGD``'s on the engine's models.
"""

from __future__ import annotations

from typing import Iterable

import torch


class PlainSGD:
    """``torch.optim.SGD(params, lr)``'s step and ``zero_grad(set_to_none=True)``, no more."""

    def __init__(self, params: Iterable[torch.Tensor], lr: float) -> None:
        self.params = [p for p in params if p.requires_grad]
        self.lr = float(lr)

    def step(self) -> None:
        """Each parameter that has a gradient moves by ``-lr`` times it (SGD skips the rest)."""
        with torch.no_grad():
            for param in self.params:
                if param.grad is not None:
                    param.add_(param.grad, alpha=-self.lr)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every gradient (``set_to_none``, as the engine asks) or fill it with zeros."""
        for param in self.params:
            if param.grad is None:
                continue
            if set_to_none:
                param.grad = None
            else:
                param.grad.detach_().zero_()


__all__ = ["PlainSGD"]
