"""One stage's buffers and compute, with DeepSpeed's pipeline-engine semantics.

The point of running a schedule for real is that a buffer hazard fails the way it failed in
DeepSpeed, so this class keeps the engine's data structures and nothing smarter:

- ``inputs[b]``, ``outputs[b]``, ``labels[b]`` per buffer and one ``grad_layer``;
- ``RecvActivation`` stores a *new* tensor in ``inputs[b]`` (any ``.grad`` on the old one is gone);
- ``ForwardPass`` runs the stage on ``inputs[b]`` into ``outputs[b]`` (the loss on the last stage);
- ``BackwardPass`` back-propagates ``grad_layer`` from ``outputs[b]``, which leaves the input
  gradient on the tensor that was ``inputs[b]`` at forward time;
- ``SendGrad`` sends ``inputs[b].grad`` and, like the engine's assertion, fails when it is
  ``None``: the seed's bug (``RecvActivation`` replaced the tensor that carried the gradient).

Parameter gradients accumulate across micro-batches; ``OptimizerStep`` applies them. Which
micro-batch each slot holds is tracked only to say so, never to steer execution: a read that
finds another micro-batch's data does not crash the engine (it silently computes with it), so
it is kept in ``observations`` and reported as a finding while the run goes on as DeepSpeed's would.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch
from torch import nn

from explorer.pipeline.runtime.models import LossFn
from explorer.pipeline.runtime.sgd import PlainSGD
from explorer.pipeline.schedules.instructions import Instruction


def _backward(
    out: torch.Tensor,
    grad: Optional[torch.Tensor],
    inputs: Optional[Sequence[torch.Tensor]] = None,
    retain_graph: bool = False,
) -> None:
    """``torch.autograd.backward(out, grad_tensors=grad, ...)``, as DeepSpeed's engine calls it,
    without the import that call makes: given a gradient tensor, torch checks its shape through
    ``torch.fx.experimental.symbolic_shapes``, which imports sympy (0.4-0.5 s of CPU in every
    rank but the last, before its first backward).

    The gradient enters as ``sum(out * grad)``: the sum's backward is ones, the product's is
    ``ones * grad``, which is ``grad`` bit for bit (a product by 1.0 is exact, NaN and -0.0
    included), so every gradient below is the one the direct call gives (the bitwise tests
    against the reference and DeepSpeed's engine hold it). What torch refused is refused here
    too (a gradient of another shape or on another device would broadcast or move silently in
    the product), and a gradient of another dtype is converted to the output's first, as
    torch's engine converts it."""
    if grad is None:  # the last stage: a scalar loss, whose gradient is 1
        torch.autograd.backward(out, inputs=inputs, retain_graph=retain_graph)
        return
    if grad.shape != out.shape or grad.device != out.device:
        raise RuntimeError(
            f"Mismatch in the gradient received for the stage's output: it is "
            f"{tuple(grad.shape)} on {grad.device}, the output is {tuple(out.shape)} on "
            f"{out.device}"
        )
    grad = grad if grad.dtype == out.dtype else grad.to(out.dtype)
    torch.autograd.backward((out * grad).sum(), inputs=inputs, retain_graph=retain_graph)


class BufferFault(RuntimeError):
    """An instruction found a buffer without what it needs (the engine would assert here)."""


class StageState:
    """Buffers, module and optimizer of one stage (see the module docstring)."""

    def __init__(
        self,
        stage: int,
        module: nn.Sequential,
        num_buffers: int,
        *,
        first: bool,
        last: bool,
        loss_fn: LossFn,
        num_microbatches: int,
        lr: float = 0.1,
    ) -> None:
        self.stage, self.module, self.first, self.last = stage, module, first, last
        self.loss_fn = loss_fn
        self.scale = 1.0 / num_microbatches
        n = max(num_buffers, 1)
        self.inputs: list[Optional[torch.Tensor]] = [None] * n
        self.outputs: list[Optional[torch.Tensor]] = [None] * n
        self.labels: list[Optional[torch.Tensor]] = [None] * n
        self.output_grads: list[Optional[torch.Tensor]] = [None] * n  # kept for BackwardWeight
        self.forward_inputs: list[Optional[torch.Tensor]] = [
            None
        ] * n  # the graph's leaf, for BackwardInput
        self.grad_layer: Optional[torch.Tensor] = None
        self.holds = {
            "input": [-1] * n,
            "output": [-1] * n,
            "labels": [-1] * n,
        }  # micro-batch per slot
        self.observations: list[str] = []  # silent wrong reads, in order
        self.losses: dict[int, torch.Tensor] = {}
        self.optimizer = (
            PlainSGD(module.parameters(), lr=lr) if any(True for _ in module.parameters()) else None
        )

    # -- loads and compute ---------------------------------------------------------------------
    def load(self, ins: Instruction, sample: torch.Tensor, target: torch.Tensor) -> None:
        if self.first:
            self.inputs[ins.buffer] = sample
            self.holds["input"][ins.buffer] = ins.microbatch
        if self.last:
            self.labels[ins.buffer] = target
            self.holds["labels"][ins.buffer] = ins.microbatch

    def forward(self, ins: Instruction) -> None:
        b = ins.buffer
        x = self._need(
            self.inputs[b], ins, f"inputs[{b}] is empty: nothing was loaded or received into it"
        )
        self._observe("input", "inputs", ins)
        out = self.module(x)
        if self.last:
            label = self._need(
                self.labels[b], ins, f"labels[{b}] is empty: LoadMicroBatch never filled it"
            )
            self._observe("labels", "labels", ins)
            out = self.loss_fn(out, label)
            self.losses[ins.microbatch] = out.detach().clone()
        self.outputs[b] = out
        self.forward_inputs[b] = x
        self.holds["output"][b] = ins.microbatch

    def backward(self, ins: Instruction, *, weights: bool = True, inputs: bool = True) -> None:
        """``BackwardPass`` (both), ``BackwardInput`` (``weights=False``), ``BackwardWeight``."""
        b = ins.buffer
        out = self._need(self.outputs[b], ins, f"outputs[{b}] is empty: no ForwardPass wrote it")
        self._observe("output", "outputs", ins)
        if self.last:
            out, grad = out * self.scale, None
        elif not inputs:  # BackwardWeight: the output gradient saved by BackwardInput
            grad = self._need(
                self.output_grads[b],
                ins,
                f"no output gradient kept for buffer {b}: BackwardInput did not run",
            )
        else:
            grad = self._need(
                self.grad_layer, ins, "grad_layer is empty: no RecvGrad before this backward"
            )
        if weights and inputs:  # BackwardPass: the gradient lands on whatever the graph's input was
            _backward(out, grad)
            self.outputs[b], self.output_grads[b] = None, None
            return
        leaf = self.forward_inputs[b]
        targets = (
            list(self.module.parameters())
            if weights
            else ([leaf] if leaf is not None and leaf.requires_grad else [])
        )
        if targets:
            _backward(out, grad, inputs=targets, retain_graph=not weights)
        self.output_grads[b] = None if weights else grad
        if weights:
            self.outputs[b] = None

    def send_grad(self, ins: Instruction) -> torch.Tensor:
        """``inputs[b].grad``, or the engine's failure when the tensor that carried it was replaced."""
        b = ins.buffer
        x = self.inputs[b]
        if x is None or x.grad is None:
            holder = self.holds["input"][b]
            why = (
                f"inputs[{b}] now holds micro-batch {holder}'s input, received after the backward of micro-batch "
                f"{ins.microbatch}, so the tensor that carried the gradient is gone"
                if holder != ins.microbatch
                else f"inputs[{b}] has no gradient: no backward ran for micro-batch {ins.microbatch}"
            )
            raise BufferFault(
                f"{ins.deepspeed_repr()} on stage {self.stage}: inputs[{b}].grad is None "
                f"(DeepSpeed asserts inputs.grad is not None here); {why}"
            )
        return x.grad

    def send_activation(self, ins: Instruction) -> torch.Tensor:
        b = ins.buffer
        return self._need(
            self.outputs[b], ins, f"outputs[{b}] is empty: no ForwardPass wrote it"
        ).detach()

    def recv_activation(self, ins: Instruction, tensor: torch.Tensor) -> None:
        self.inputs[ins.buffer] = tensor.requires_grad_(tensor.is_floating_point())
        self.holds["input"][ins.buffer] = ins.microbatch

    def recv_grad(self, ins: Instruction, tensor: torch.Tensor) -> None:
        self.grad_layer = tensor

    def optimizer_step(self) -> None:
        if self.optimizer is not None:
            self.optimizer.step()

    def zero_grad(self) -> None:
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        self.losses.clear()

    # -- helpers -------------------------------------------------------------------------------
    def _observe(self, slot: str, name: str, ins: Instruction) -> None:
        held = self.holds[slot][ins.buffer]
        if held != ins.microbatch:
            self.observations.append(
                f"{ins.deepspeed_repr()} on stage {self.stage} read {name}[{ins.buffer}] holding micro-batch {held} "
                f"instead of micro-batch {ins.microbatch}: the engine goes on with the wrong data, silently"
            )

    def _need(self, value: Optional[torch.Tensor], ins: Instruction, message: str) -> torch.Tensor:
        if value is None:
            raise BufferFault(f"{ins.deepspeed_repr()} on stage {self.stage}: {message}")
        return value


__all__ = ["BufferFault", "StageState"]
