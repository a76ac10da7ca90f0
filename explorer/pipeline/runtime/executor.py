"""Runs one rank's instruction stream, step by step, timing every instruction.

The executor is deliberately dumb: it does what each instruction says to the stage's buffers
(:mod:`.stage_state`) and channels (:mod:`.p2p`), in the schedule's order, and nothing else.
That is what makes a hazard in the schedule a real failure here. Any exception is wrapped in
:class:`InstructionFailed`, which says at which step and instruction the rank stopped and
whether the cause is the rank's own (a buffer fault, an error) or a neighbour's (a peer that
died, a receive that timed out).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable, Optional

import torch

from explorer.failure import LOST_PEER_WORDS
from explorer.pipeline.runtime.p2p import Channels, describe
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.runtime.spec import Fault
from explorer.pipeline.runtime.stage_state import BufferFault, StageState
from explorer.pipeline.schedules.instructions import Instruction, Kind
from explorer.pipeline.schedules.schedule import Schedule

#: A lost neighbour in an exception's text: the base's words, and any that names a peer.
_PEER_WORDS = (*LOST_PEER_WORDS, "peer")


class InstructionFailed(RuntimeError):
    """A rank stopped at ``step`` in ``instruction``; ``cause`` is buffer, error, peer or timeout."""

    def __init__(self, step: int, instruction: Instruction, cause: str, message: str) -> None:
        super().__init__(message)
        self.step, self.instruction, self.cause = step, instruction, cause


def classify(exc: BaseException) -> str:
    """``buffer`` (the schedule's fault), ``timeout`` (a stall), ``peer`` (a neighbour died) or ``error``."""
    if isinstance(exc, BufferFault):
        return "buffer"
    text = str(exc).lower()
    if any(word in text for word in ("timed out", "timeout", "timing out")):  # gloo, NCCL
        return "timeout"
    if any(word in text for word in _PEER_WORDS):
        return "peer"
    return "error"


class RankExecutor:
    """One rank's stages, channels and stream (see the module docstring)."""

    def __init__(
        self,
        rank: int,
        schedule: Schedule,
        states: dict[int, StageState],
        channels: Channels,
        data_fn: Callable[[int], tuple[torch.Tensor, torch.Tensor]],
        device: torch.device,
        recorder: Optional[Recorder] = None,
        fault: Optional[Fault] = None,
    ) -> None:
        self.rank, self.schedule, self.states, self.channels = rank, schedule, states, channels
        self.data_fn, self.device, self.recorder = data_fn, device, recorder
        self.fault = fault if fault is not None and fault.rank == rank else None
        self.stream = schedule.stream(rank)
        own = {ins.stage for step in self.stream for ins in step if ins.kind == Kind.OPTIMIZER_STEP}
        # An OptimizerStep steps its own stage plus any stage of the rank that has none of its own
        # (interleaved schedules list one per rank, on the rank's first stage).
        self.step_owners = {
            s: [s] + [t for t in states if t not in own] if s == min(own) else [s] for s in own
        }

    def run(self, iteration: int, *, clock: Optional[Any] = None) -> None:
        """One iteration; ``clock`` (``now()`` marks) times every instruction when given."""
        for state in self.states.values():
            state.zero_grad()
        for step, instructions in enumerate(self.stream):
            if self.fault is not None and iteration == 0 and step == self.fault.step:
                self._inject(self.fault, step, instructions)
            for ins in instructions:
                start = clock.now() if clock else None
                try:
                    self.execute(ins, iteration, step)
                except Exception as exc:  # every failure leaves with its step and instruction
                    raise InstructionFailed(
                        step, ins, classify(exc), f"{type(exc).__name__}: {exc}"
                    ) from exc
                if clock and self.recorder is not None:
                    end = clock.now()
                    message = self.message(ins) if ins.kind.is_p2p else None
                    self.recorder.add(iteration, step, ins, start, end, message)
                state = self.states[ins.stage]
                if state.observations and self.recorder is not None:
                    for message in state.observations:
                        self.recorder.event(
                            "hazard",
                            stage=ins.stage,
                            step=step,
                            instruction=ins.deepspeed_repr(),
                            text=str(ins),
                            iteration=iteration,
                            message=message,
                            time=time.time(),
                        )
                    state.observations.clear()
            if clock and instructions and self.recorder is not None:
                self.recorder.flush_ready()  # on a GPU: the steps whose events completed
        last = len(self.stream) - 1
        try:
            self.channels.drain()
        except Exception as exc:
            ins = next(
                (i for i in reversed(self.stream[last]) if i.kind.is_send),
                Instruction(min(self.states), Kind.SEND_GRAD),
            )
            raise InstructionFailed(
                last, ins, classify(exc), f"waiting for posted sends: {type(exc).__name__}: {exc}"
            ) from exc

    def message(self, ins: Instruction) -> Optional[dict]:
        """What a send sent or a receive received into (the ``p2p`` fields of its line).

        Read after the instruction from where the stage keeps it, so a send's ``requires_grad``
        is its output's (the wire copy is detached) and a receive's the one the stage set.
        """
        state, kind, b = self.states[ins.stage], ins.kind, ins.buffer
        if kind == Kind.SEND_ACTIVATION:
            tensor = state.outputs[b]
        elif kind == Kind.SEND_GRAD:
            x = state.inputs[b]
            tensor = x.grad if x is not None else None
        elif kind == Kind.RECV_ACTIVATION:
            tensor = state.inputs[b]
        else:
            tensor = state.grad_layer
        if tensor is None:
            return None
        fields: dict = {"p2p": describe((tensor,))}
        if kind.is_recv and self.channels.reused_from is not None:
            fields["reused"] = list(self.channels.reused_from)
        return fields

    def execute(self, ins: Instruction, iteration: int, step: int = -1) -> None:
        state, kind = self.states[ins.stage], ins.kind
        if kind == Kind.LOAD:
            x, y = self.data_fn(iteration * self.schedule.num_microbatches + ins.microbatch)
            state.load(ins, x.to(self.device), y.to(self.device))
        elif kind == Kind.FORWARD:
            state.forward(ins)
        elif kind == Kind.BACKWARD:
            state.backward(ins)
        elif kind == Kind.BACKWARD_INPUT:
            state.backward(ins, weights=False)
        elif kind == Kind.BACKWARD_WEIGHT:
            state.backward(ins, inputs=False)
        elif kind == Kind.SEND_ACTIVATION:
            self.channels.send(ins, state.send_activation(ins))
        elif kind == Kind.SEND_GRAD:
            self.channels.send(ins, state.send_grad(ins))
        elif kind == Kind.RECV_ACTIVATION:
            state.recv_activation(ins, self.channels.recv(ins, (iteration, step)))
        elif kind == Kind.RECV_GRAD:
            state.recv_grad(ins, self.channels.recv(ins, (iteration, step)))
        elif kind == Kind.OPTIMIZER_STEP:
            for stage in self.step_owners.get(ins.stage, [ins.stage]):
                self.states[stage].optimizer_step()
        # ReduceGrads / ReduceTiedGrads: one pipeline, no data parallelism, no tied weights: nothing to reduce.

    def _inject(self, fault: Fault, step: int, instructions: list[Instruction]) -> None:
        """The requested fault, for real: SIGKILL, SIGSTOP, an exception, or a hang."""
        if self.recorder is not None:  # every step measured before the fault stays on disk
            self.recorder.flush_before_failure()
        if fault.how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if fault.how == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
            return  # continued (SIGCONT): the rank goes on where it stood
        if fault.how == "hang":
            time.sleep(3600)
        ins = instructions[0] if instructions else Instruction(min(self.states), Kind.FORWARD, 0, 0)
        injected = RuntimeError(f"fault injected on rank {self.rank} at step {step}")
        raise InstructionFailed(
            step, ins, "error", f"{type(injected).__name__}: {injected}"
        ) from injected


__all__ = ["InstructionFailed", "classify", "RankExecutor"]
