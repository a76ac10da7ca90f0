"""Point-to-point exchanges between stages on ``torch.distributed``, under the schedule's P2P model.

Two models, as in the analysis (``schedule.params["p2p"]``):

- ``blocking`` (DeepSpeed): ``dist.send``/``dist.recv``. Gloo's send waits for the matching
  receive to be posted, so an exchange is a rendezvous, like the engine's pairwise P2P.
- ``batched`` (PyTorch-style): a send is posted with ``dist.isend`` right after the compute that
  produced it and completes in the background; receives wait. The pending sends are waited at
  the end of the iteration (they keep their tensors alive until then).

Each direction between two stages is its own channel, so a rank holding several stages
(interleaving) never mixes them up: its own tag, and on NCCL its own process group
(:func:`open_directions`; on gloo, where tags pair exchanges, a group per direction would only
add seconds of set-up). The group is what makes this hold on NCCL, which ignores tags (an
exchange pairs with the next one on its communicator, in order) and runs the operations of one
communicator one after another on one stream: with one communicator for everything, a posted
send of activations would wait behind, or block, a receive of gradients going the other way,
and 1F1B's steady state would hang where gloo passes. One communicator per direction keeps
each channel's order and lets the two directions run side by side, as they do on gloo.

Stages on the same rank hand tensors over locally. With a GPU shared through gloo, tensors
cross through host memory (a copy each way per exchange).

Two options reproduce what other engines do, so their failures can be run for real:

- ``tagged=False`` sends every message between two ranks untagged, on one channel per rank
  pair, as Megatron-LM's P2P does (and as NCCL pairs without a communicator per direction):
  where a stage's next and previous rank are the same peer, messages pair first in, first out
  across directions, and two of them can silently swap.
- ``pooled=True`` keeps one receive buffer per direction, allocated on the first receive and
  reused afterwards (DeepSpeed's ``pipe_recv_buf`` and ``grad_layer``); the stage gets a copy.

Each receive says where its buffer came from (:attr:`Channels.reused_from`) and
:func:`describe` says what a tuple holds, for the ``p2p`` field of the trace lines
(:mod:`explorer.pipeline.traces.messages`).
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any, Mapping, Optional, Sequence

import torch
import torch.distributed as dist

from explorer.pipeline.schedules.instructions import Instruction, Kind


class Channels:
    """Sends and receives for one rank (see the module docstring)."""

    def __init__(
        self,
        rank: int,
        stage_to_rank: tuple[int, ...],
        boundaries: list[tuple[torch.Size, torch.dtype]],
        *,
        blocking: bool,
        device: torch.device,
        via_host: bool,
        groups: Optional[Mapping[int, Any]] = None,
        tagged: bool = True,
        pooled: bool = False,
    ) -> None:
        self.rank, self.stage_to_rank, self.boundaries = rank, stage_to_rank, boundaries
        self.blocking, self.device, self.via_host = blocking, device, via_host
        self.groups = dict(groups or {})  # tag -> the direction's process group (None: default)
        self.pending: list[tuple[dist.Work | None, torch.Tensor]] = []  # None: not in the group
        self.local: dict[int, deque[torch.Tensor]] = defaultdict(deque)
        self.tagged, self.pooled = tagged, pooled
        #: Per direction's tag: the pooled buffer and the (iteration, step) that allocated it.
        self.pool: dict[int, tuple[torch.Tensor, tuple[int, int]]] = {}
        #: Where the last receive's buffer came from: None (fresh) or the allocating receive.
        self.reused_from: Optional[tuple[int, int]] = None

    @staticmethod
    def peer_stage(ins: Instruction) -> int:
        """The stage on the other end of a P2P instruction."""
        return (
            ins.stage + 1 if ins.kind in (Kind.SEND_ACTIVATION, Kind.RECV_GRAD) else ins.stage - 1
        )

    @staticmethod
    def tag(sender_stage: int, kind: Kind) -> int:
        return 2 * sender_stage + (kind in (Kind.SEND_GRAD, Kind.RECV_GRAD))

    def send(self, ins: Instruction, tensor: torch.Tensor) -> None:
        peer = self.peer_stage(ins)
        tag, dst = self.tag(ins.stage, ins.kind), self.stage_to_rank[peer]
        if dst == self.rank:
            self.local[tag].append(tensor.detach().clone())
            return
        wire = tensor.detach().cpu() if self.via_host else tensor.detach().contiguous()
        group = self.groups.get(tag)
        wire_tag = tag if self.tagged else 0
        if self.blocking:
            dist.send(wire, dst, group=group, tag=wire_tag)
        else:
            self.pending.append((dist.isend(wire, dst, group=group, tag=wire_tag), wire))

    def recv(self, ins: Instruction, at: tuple[int, int] = (-1, -1)) -> torch.Tensor:
        """The message ``ins`` receives; ``at`` (iteration, step) names a pooled buffer's origin."""
        peer = self.peer_stage(ins)
        tag, src = self.tag(peer, ins.kind), self.stage_to_rank[peer]
        self.reused_from = None
        if src == self.rank:
            return self.local[tag].popleft()
        wire = self._buffer(ins, tag, at)
        dist.recv(wire, src, group=self.groups.get(tag), tag=tag if self.tagged else 0)
        if self.pooled:
            wire = wire.clone()  # the stage keeps its copy; the pooled buffer is reused
        return wire.to(self.device) if self.via_host else wire

    def _buffer(self, ins: Instruction, tag: int, at: tuple[int, int]) -> torch.Tensor:
        """A fresh receive buffer, or the direction's pooled one (allocated on first use)."""
        if self.pooled and tag in self.pool:
            wire, self.reused_from = self.pool[tag]
            return wire
        # An activation entering stage s has the shape of boundary s; a gradient coming back
        # into stage s has the shape of stage s's output, boundary s + 1.
        shape, dtype = self.boundaries[
            ins.stage if ins.kind == Kind.RECV_ACTIVATION else ins.stage + 1
        ]
        wire = torch.empty(shape, dtype=dtype, device="cpu" if self.via_host else self.device)
        if self.pooled:
            self.pool[tag] = (wire, at)
        return wire

    def drain(self) -> None:
        """Wait for every posted send (end of an iteration)."""
        for work, _ in self.pending:
            if work is not None:
                work.wait()
        self.pending.clear()


_DTYPE_NAMES: dict[torch.dtype, str] = {}


def describe(tensors: Sequence[torch.Tensor]) -> list[str]:
    """Each tensor as ``"float32[4,8]*"`` (``*``: requires a gradient), the ``p2p`` field's form."""
    out = []
    for t in tensors:
        name = _DTYPE_NAMES.get(t.dtype)
        if name is None:
            name = _DTYPE_NAMES[t.dtype] = str(t.dtype).removeprefix("torch.")
        shape = ",".join(map(str, t.shape))
        out.append(f"{name}[{shape}]*" if t.requires_grad else f"{name}[{shape}]")
    return out


def directions(stage_to_rank: Sequence[int]) -> list[tuple[int, tuple[int, int]]]:
    """Every direction that crosses ranks, as (tag, (rank, rank)), in one order all ranks share.

    Activations go from stage s to s + 1 (tag of sender s), gradients from s + 1 back to s (tag
    of sender s + 1, odd): the same tags :meth:`Channels.tag` gives the instructions.
    """
    out: list[tuple[int, tuple[int, int]]] = []
    for s in range(len(stage_to_rank) - 1):
        a, b = stage_to_rank[s], stage_to_rank[s + 1]
        if a != b:
            pair = (min(a, b), max(a, b))
            out.append((Channels.tag(s, Kind.SEND_ACTIVATION), pair))
            out.append((Channels.tag(s + 1, Kind.SEND_GRAD), pair))
    return out


def open_directions(stage_to_rank: Sequence[int]) -> dict[int, Any]:
    """One process group per direction (see the module docstring); every rank must call it."""
    return {tag: dist.new_group(list(pair)) for tag, pair in directions(stage_to_rank)}


__all__ = ["Channels", "describe", "directions", "open_directions"]
