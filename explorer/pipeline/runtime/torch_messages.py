"""What travels on PyTorch's pipelining path: each send's and receive's tensor tuple, on its line.

``_PipelineScheduleRuntime`` never shows the tensors it exchanges: for each ``SEND_F``,
``SEND_B``, ``RECV_F`` and ``RECV_B`` action it asks the stage for its ``P2POp`` list
(``get_fwd_send_ops``, ``get_bwd_send_ops``, ``get_fwd_recv_ops``, ``get_bwd_recv_ops``) and
hands it to ``batch_isend_irecv``. Those four methods are the one place where a message's
tensors, its stage and its micro-batch are all known, on every schedule the runtime runs, so
:class:`Messages` wraps them on each stage instance (nothing else in the process changes): a
send's ops hold the tensors sent, a receive's ops the buffers received into.

Each message becomes one ``message`` line of ``torch_rank<R>.jsonl`` with the fields of the
explorer's own ``instr`` lines (:mod:`explorer.pipeline.traces.messages`): ``iteration``,
``stage``, ``step`` and ``text`` of the exchange in the schedule built from the runtime's own
compute+comms order (:func:`explorer.pipeline.analysis.contract.message_steps`), ``p2p``, and
``reused`` for a receive into a buffer an earlier receive filled (PyTorch allocates each
micro-batch's receive buffers once, at the first step, and reuses them every iteration).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

from explorer.pipeline.runtime.p2p import describe
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.schedules.instructions import Instruction, Kind

#: The stage methods that build each kind of exchange's ``P2POp`` list.
GETTERS: dict[str, Kind] = {
    "get_fwd_send_ops": Kind.SEND_ACTIVATION,
    "get_bwd_send_ops": Kind.SEND_GRAD,
    "get_fwd_recv_ops": Kind.RECV_ACTIVATION,
    "get_bwd_recv_ops": Kind.RECV_GRAD,
}

#: Every receive buffer seen, by ``id``: the tensor (kept, so its id is never reused) and the
#: (iteration, step) of the receive that first filled it.
Origins = dict[int, tuple[torch.Tensor, tuple[int, int]]]


def message_fields(
    tensors: Sequence[torch.Tensor], origins: Origins, here: tuple[int, int], receive: bool
) -> dict[str, Any]:
    """The ``p2p`` (and, for a receive into a buffer seen before, ``reused``) fields of a message.

    ``here`` is the message's (iteration, step); a receive's buffers not seen before are
    remembered in ``origins`` as filled here. The buffer reused is the tuple's first one that
    was seen before (the same rule as DeepSpeed's tracer).
    """
    fields: dict[str, Any] = {"p2p": describe(tensors)}
    if not receive:
        return fields
    reused = None
    for t in tensors:
        seen = origins.get(id(t))
        if seen is not None and seen[0] is t:
            reused = reused or seen[1]
        else:
            origins[id(t)] = (t, here)
    if reused is not None:
        fields["reused"] = list(reused)
    return fields


class Messages:
    """Writes a ``message`` line for every exchange of the stages it watches (module docstring)."""

    def __init__(
        self, recorder: Recorder, steps: dict[tuple[int, Kind, int], tuple[int, Instruction]]
    ) -> None:
        self.recorder, self.steps = recorder, steps
        self.iteration = 0  # set by the worker before each step of the runtime
        self.origins: Origins = {}

    def watch(self, stage: Any) -> None:
        """Wrap ``stage``'s four ``P2POp`` builders (on the instance only)."""
        for name, kind in GETTERS.items():
            setattr(stage, name, self._wrapped(getattr(stage, name), stage.stage_index, kind))

    def _wrapped(self, build: Callable[[int], list], stage: int, kind: Kind) -> Callable:
        def ops(microbatch: int) -> list:
            out = build(microbatch)
            self.record(stage, kind, microbatch, [op.tensor for op in out])
            return out

        return ops

    def record(self, stage: int, kind: Kind, microbatch: int, tensors: list) -> None:
        """One exchange's line, at the step the schedule gives it."""
        step, ins = self.steps[(stage, kind, microbatch)]
        fields = message_fields(tensors, self.origins, (self.iteration, step), kind.is_recv)
        self.recorder.event(
            "message",
            iteration=self.iteration,
            stage=stage,
            step=step,
            instruction=ins.deepspeed_repr(),
            text=str(ins),
            microbatch=microbatch,
            **fields,
        )


__all__ = ["GETTERS", "Messages", "Origins", "message_fields"]
