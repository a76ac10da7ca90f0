"""Typed findings: the records every view, the CLI and the tests consume.

Validation returns records, never prints. Each record pins its finding to a stage, a rank and
a step, carries the instruction in the compact text form, and can say itself in words
(``describe``) and as JSON (``to_dict``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Optional, get_args

#: How a send meets its receive: ``blocking`` (DeepSpeed's rendezvous) or ``batched``
#: (PyTorch's ``batch_isend_irecv``); what executing a stream means under each is
#: :mod:`explorer.pipeline.analysis.p2p_models`. Defined here, where the records that name it are.
P2PModel = Literal["blocking", "batched"]
MODELS: tuple[P2PModel, ...] = get_args(P2PModel)


@dataclass(frozen=True)
class Ref:
    """One instruction in a schedule: where it is and what it is, in both spellings.

    ``text`` is the compact form the schedule files use (``"2SG0b0"``); ``deepspeed_repr`` is
    how DeepSpeed prints the instruction (``"SendGrad(buffer_id=0)"``), which is what messages
    and the JSON's ``instruction`` key show because that is what a DeepSpeed user recognises.
    """

    index: int  # row in the schedule's columns
    rank: int
    stage: int
    step: int
    text: str
    deepspeed_repr: str

    def to_dict(self) -> dict:
        return {
            "rank": self.rank,
            "stage": self.stage,
            "step": self.step,
            "instruction": self.deepspeed_repr,
            "text": self.text,
        }


@dataclass(frozen=True)
class _PinnedAt:
    """Records that point at one instruction (``at``) expose its stage and step directly."""

    at: Ref

    @property
    def stage(self) -> int:
        return self.at.stage

    @property
    def step(self) -> int:
        return self.at.step


@dataclass(frozen=True)
class Hazard(_PinnedAt):
    """An instruction read a buffer slot that does not hold the micro-batch it expects."""

    at: Ref
    buffer: int
    slot: str  # input, output, labels, input-grad, grad-layer
    expected_microbatch: int
    found_microbatch: Optional[int]  # None: never written
    overwritten_by: Optional[Ref]
    cause: str

    def describe(self) -> str:
        return self.cause

    def to_dict(self) -> dict:
        return {
            "stage": self.at.stage,
            "rank": self.at.rank,
            "step": self.at.step,
            "instruction": self.at.deepspeed_repr,
            "buffer": self.buffer,
            "slot": self.slot,
            "expected_microbatch": self.expected_microbatch,
            "found_microbatch": self.found_microbatch,
            "overwritten_by": None
            if self.overwritten_by is None
            else {
                "step": self.overwritten_by.step,
                "instruction": self.overwritten_by.deepspeed_repr,
                "stage": self.overwritten_by.stage,
            },
            "cause": self.cause,
        }


@dataclass(frozen=True)
class Unmatched(_PinnedAt):
    """A send or receive with no partner on the neighbouring stage."""

    at: Ref
    peer_stage: int
    reason: str

    def describe(self) -> str:
        return self.reason

    def to_dict(self) -> dict:
        return {**self.at.to_dict(), "peer_stage": self.peer_stage, "reason": self.reason}


@dataclass(frozen=True)
class Mismatch:
    """A send and the receive it meets carry different micro-batches (FIFO order disagrees)."""

    send: Ref
    recv: Ref
    sent_microbatch: int
    expected_microbatch: int

    @property
    def stage(self) -> int:
        return self.recv.stage

    @property
    def step(self) -> int:
        return self.recv.step

    def describe(self) -> str:
        return (
            f"stage {self.recv.stage} step {self.recv.step}: {self.recv.deepspeed_repr} expects micro-batch "
            f"{self.expected_microbatch} but the matching {self.send.deepspeed_repr} on stage {self.send.stage} "
            f"(step {self.send.step}) sends micro-batch {self.sent_microbatch}"
        )

    def to_dict(self) -> dict:
        return {
            "send": self.send.to_dict(),
            "recv": self.recv.to_dict(),
            "sent_microbatch": self.sent_microbatch,
            "expected_microbatch": self.expected_microbatch,
        }


@dataclass(frozen=True)
class Waiting:
    """A rank stuck at ``at``, waiting for ``waits_for_rank`` (None: for a partner that never comes)."""

    at: Ref
    waits_for_rank: Optional[int]
    waits_for_stage: Optional[int]

    def describe(self) -> str:
        who = (
            "a partner that never comes"
            if self.waits_for_rank is None
            else f"stage {self.waits_for_stage} (rank {self.waits_for_rank})"
        )
        return f"stage {self.at.stage} (rank {self.at.rank}) is stuck at step {self.at.step} in {self.at.deepspeed_repr}, waiting for {who}"

    def to_dict(self) -> dict:
        return {
            **self.at.to_dict(),
            "waits_for_rank": self.waits_for_rank,
            "waits_for_stage": self.waits_for_stage,
        }


@dataclass(frozen=True)
class Deadlock:
    """Ranks that can never progress under a P2P model, with the cycle of waits that explains it."""

    model: P2PModel  # "blocking" (DeepSpeed) or "batched" (PyTorch)
    cycle: tuple[Waiting, ...]  # empty when the chain ends at an unmatched exchange
    stuck: tuple[Waiting, ...]  # every stuck rank's first blocked instruction

    @property
    def stage(self) -> int:
        return (self.cycle or self.stuck)[0].at.stage

    @property
    def step(self) -> int:
        return (self.cycle or self.stuck)[0].at.step

    def describe(self) -> str:
        if self.cycle:
            loop = " -> ".join(
                f"stage {w.at.stage} step {w.at.step} {w.at.deepspeed_repr}" for w in self.cycle
            )
            return (
                f"deadlock under {self.model} P2P: {loop} -> back to stage {self.cycle[0].at.stage}"
            )
        return f"deadlock under {self.model} P2P: " + "; ".join(
            w.describe() for w in self.stuck[:4]
        )

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "cycle": [w.to_dict() for w in self.cycle],
            "stuck": [w.to_dict() for w in self.stuck],
            "description": self.describe(),
        }


@dataclass(frozen=True)
class Bubble:
    """Idle share of a simulated timeline, with both denominators labelled."""

    makespan: float
    busy_per_rank: tuple[float, ...]
    of_total: float  # idle / (ranks * makespan)
    #: (makespan - mean busy) / mean busy; None when nothing computes (every cost 0): no ratio
    of_ideal: Optional[float]

    def to_dict(self) -> dict:
        return {
            "makespan": self.makespan,
            "busy_per_rank": list(self.busy_per_rank),
            "fraction_of_total": self.of_total,
            "fraction_of_ideal": self.of_ideal,
            "definitions": {
                "fraction_of_total": "idle time / (ranks x makespan)",
                "fraction_of_ideal": "(makespan - mean busy time) / mean busy time",
            },
        }


@dataclass(frozen=True)
class BufferUse:
    """Buffers each stage allocates versus the peak number of micro-batches it holds at once."""

    allocated: tuple[int, ...]
    needed: tuple[int, ...]

    def to_dict(self) -> dict:
        return {"allocated": list(self.allocated), "needed": list(self.needed)}


@dataclass(frozen=True)
class GradientCount:
    """A stage and micro-batch whose weight gradient reaches the optimizer step ``count`` times (not 1).

    Only a training schedule has this finding (:func:`explorer.pipeline.analysis.gradients.trains`): a
    forward-only schedule produces no gradient, so "never" would be no fault of it.
    """

    stage: int
    microbatch: int
    count: int
    late: int  # produced after the optimizer step: lost for this iteration
    rank: int = -1
    #: The step to look at: the extra or late gradient's, else the rank's optimizer step (or its
    #: last step when the step follows the schedule), where the missing gradient is missed.
    step: int = -1

    def describe(self) -> str:
        times = "never" if self.count == 0 else f"{self.count} times"
        late = f" ({self.late} produced after the optimizer step)" if self.late else ""
        return (
            f"stage {self.stage} micro-batch {self.microbatch}: its weight gradient reaches the "
            f"optimizer step {times}, not once{late}"
        )

    def to_dict(self) -> dict:
        return {**vars(self), "description": self.describe()}


@dataclass(frozen=True)
class CommunicatorDeadlock:
    """Lazily created two-rank communicators (NCCL) whose creation order deadlocks.

    Asked only with ``communicators="lazy"``: eagerly created communicators cannot deadlock this
    way. ``words`` names the ranks and the order each meets its peers (Megatron-LM #5240).
    """

    words: str
    rank: int = -1  # the first rank stuck creating a communicator
    stage: int = -1
    step: int = -1  # its first exchange with the peer it waits for

    def describe(self) -> str:
        return self.words

    def to_dict(self) -> dict:
        return {"deadlock": self.words, "rank": self.rank, "stage": self.stage, "step": self.step}


@dataclass(frozen=True)
class Findings:
    """Everything :func:`explorer.pipeline.analysis.check` found in one schedule.

    ``ok`` is the one definition of a valid schedule: the single check, the sweep's cells, the
    widgets and the exit code all read it, so a finding kind added here counts everywhere.
    """

    hazards: tuple[Hazard, ...] = ()
    unmatched: tuple[Unmatched, ...] = ()
    mismatched: tuple[Mismatch, ...] = ()
    deadlock: Optional[Deadlock] = None
    deadlocks: dict = field(default_factory=dict)  # model -> Deadlock | None
    gradients: tuple[GradientCount, ...] = ()
    communicators: Optional[CommunicatorDeadlock] = None

    @property
    def ok(self) -> bool:
        return not (
            self.hazards
            or self.unmatched
            or self.mismatched
            or self.deadlock
            or self.gradients
            or self.communicators
        )

    def all(self) -> list:
        """Every finding, deadlocks first (they stop the run), then in stage/step order (a new list)."""
        return list(self._ordered)

    @cached_property
    def _ordered(self) -> tuple:
        # Sorted once: a broken 64-stage schedule has tens of thousands of findings, and the
        # explorer asks for them from several views on every change.
        rest = sorted(
            [*self.hazards, *self.unmatched, *self.mismatched, *self.gradients],
            key=lambda f: (f.step, f.stage),
        )
        first: list = [self.deadlock] if self.deadlock else []
        first += [self.communicators] if self.communicators else []
        return tuple(first + rest)


__all__ = [
    "MODELS",
    "P2PModel",
    "Ref",
    "Hazard",
    "Unmatched",
    "Mismatch",
    "Waiting",
    "Deadlock",
    "Bubble",
    "BufferUse",
    "GradientCount",
    "CommunicatorDeadlock",
    "Findings",
]
