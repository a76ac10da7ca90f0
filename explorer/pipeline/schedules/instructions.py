"""Typed pipeline instructions and their compact text form.

An instruction is one typed action on one stage, carrying the micro-batch it serves and, for
buffer instructions, the buffer slot it touches. The text form follows PyTorch's
``_Action`` (``2F0`` = stage 2, forward, micro-batch 0) and adds the buffer after ``b``
(``2RA2b0`` = stage 2 receives micro-batch 2's activation into buffer 0), so a schedule can
be pasted into an issue, diffed and parsed back unchanged.

Instructions without a micro-batch (``ReduceGrads``, ``OptimizerStep``) print as ``0R``,
``0O``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from explorer.errors import InputError


class Kind(IntEnum):
    """Instruction kinds. Values index the columnar arrays; never renumber them."""

    LOAD = 0
    FORWARD = 1
    BACKWARD = 2
    BACKWARD_INPUT = 3
    BACKWARD_WEIGHT = 4
    SEND_ACTIVATION = 5
    RECV_ACTIVATION = 6
    SEND_GRAD = 7
    RECV_GRAD = 8
    REDUCE_GRADS = 9
    REDUCE_TIED_GRADS = 10
    OPTIMIZER_STEP = 11

    @property
    def code(self) -> str:
        """Short code used in the text form and in grid cells."""
        return _CODES[self]

    @property
    def deepspeed_name(self) -> str:
        """DeepSpeed's class name for this kind (``ForwardPass``, ``RecvActivation``...)."""
        return _DEEPSPEED_NAMES[self]

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_KINDS

    @property
    def is_send(self) -> bool:
        return self in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD)

    @property
    def is_recv(self) -> bool:
        return self in (Kind.RECV_ACTIVATION, Kind.RECV_GRAD)

    @property
    def is_p2p(self) -> bool:
        return self.is_send or self.is_recv

    @property
    def has_microbatch(self) -> bool:
        return self not in (Kind.REDUCE_GRADS, Kind.REDUCE_TIED_GRADS, Kind.OPTIMIZER_STEP)


_CODES = {
    Kind.LOAD: "L",
    Kind.FORWARD: "F",
    Kind.BACKWARD: "B",
    Kind.BACKWARD_INPUT: "I",
    Kind.BACKWARD_WEIGHT: "W",
    Kind.SEND_ACTIVATION: "SA",
    Kind.RECV_ACTIVATION: "RA",
    Kind.SEND_GRAD: "SG",
    Kind.RECV_GRAD: "RG",
    Kind.REDUCE_GRADS: "R",
    Kind.REDUCE_TIED_GRADS: "RT",
    Kind.OPTIMIZER_STEP: "O",
}
_DEEPSPEED_NAMES = {
    Kind.LOAD: "LoadMicroBatch",
    Kind.FORWARD: "ForwardPass",
    Kind.BACKWARD: "BackwardPass",
    Kind.BACKWARD_INPUT: "BackwardInput",
    Kind.BACKWARD_WEIGHT: "BackwardWeight",
    Kind.SEND_ACTIVATION: "SendActivation",
    Kind.RECV_ACTIVATION: "RecvActivation",
    Kind.SEND_GRAD: "SendGrad",
    Kind.RECV_GRAD: "RecvGrad",
    Kind.REDUCE_GRADS: "ReduceGrads",
    Kind.REDUCE_TIED_GRADS: "ReduceTiedGrads",
    Kind.OPTIMIZER_STEP: "OptimizerStep",
}
KIND_BY_CODE = {code: kind for kind, code in _CODES.items()}
KIND_BY_DEEPSPEED_NAME = {name: kind for kind, name in _DEEPSPEED_NAMES.items()}
COMPUTE_KINDS = frozenset({Kind.FORWARD, Kind.BACKWARD, Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT})
#: Kinds that carry a buffer id in DeepSpeed's model.
BUFFER_KINDS = frozenset(
    {
        Kind.LOAD,
        Kind.FORWARD,
        Kind.BACKWARD,
        Kind.BACKWARD_INPUT,
        Kind.BACKWARD_WEIGHT,
        Kind.SEND_ACTIVATION,
        Kind.RECV_ACTIVATION,
        Kind.SEND_GRAD,
        Kind.RECV_GRAD,
    }
)

# Longest codes first so that "RA" is not read as "R" followed by garbage.
_TEXT_RE = re.compile(
    r"^(?P<stage>\d+)(?P<code>SA|RA|SG|RG|RT|L|F|B|I|W|R|O)(?P<mb>\d+)?(?:b(?P<buf>\d+))?$"
)


@dataclass(frozen=True, order=True)
class Instruction:
    """One typed action: ``kind`` on ``stage`` for ``microbatch`` using ``buffer``.

    ``microbatch`` and ``buffer`` are ``-1`` where they do not apply.
    """

    stage: int
    kind: Kind
    microbatch: int = -1
    buffer: int = -1

    def __str__(self) -> str:
        text = f"{self.stage}{self.kind.code}"
        if self.microbatch >= 0:
            text += str(self.microbatch)
        if self.buffer >= 0:
            text += f"b{self.buffer}"
        return text

    def deepspeed_repr(self) -> str:
        """DeepSpeed's own ``repr``: ``RecvActivation(buffer_id=0)``, ``OptimizerStep()``."""
        if self.buffer >= 0:
            return f"{self.kind.deepspeed_name}(buffer_id={self.buffer})"
        return f"{self.kind.deepspeed_name}()"

    def describe(self) -> str:
        """Words for a person: ``SendGrad of micro-batch 0 from buffer 0 on stage 2``."""
        text = self.kind.deepspeed_name
        if self.microbatch >= 0:
            text += f" of micro-batch {self.microbatch}"
        if self.buffer >= 0:
            text += f" (buffer {self.buffer})"
        return f"{text} on stage {self.stage}"


def parse_instruction(text: str) -> Instruction:
    """Parse the compact form written by ``str(instruction)``."""
    match = _TEXT_RE.match(text.strip())
    if not match:
        raise InputError(
            f"cannot read instruction {text!r}: expected STAGE CODE [MICROBATCH] [bBUFFER] "
            f"such as '2F0' or '2RA2b0', with CODE one of {', '.join(sorted(KIND_BY_CODE))}"
        )
    kind = KIND_BY_CODE[match["code"]]
    mb = int(match["mb"]) if match["mb"] is not None else -1
    if kind.has_microbatch and mb < 0:
        raise InputError(
            f"instruction {text!r} needs a micro-batch number after {kind.code!r}, e.g. '{match['stage']}{kind.code}0'"
        )
    if not kind.has_microbatch and mb >= 0:
        raise InputError(
            f"instruction {text!r}: {kind.deepspeed_name} takes no micro-batch; write '{match['stage']}{kind.code}'"
        )
    buf = int(match["buf"]) if match["buf"] is not None else -1
    return Instruction(stage=int(match["stage"]), kind=kind, microbatch=mb, buffer=buf)


__all__ = [
    "Kind",
    "KIND_BY_CODE",
    "KIND_BY_DEEPSPEED_NAME",
    "COMPUTE_KINDS",
    "BUFFER_KINDS",
    "Instruction",
    "parse_instruction",
]
