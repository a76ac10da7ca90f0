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
    ) -> None:
        self.rank, self.stage_to_rank, self.boundaries = rank, stage_to_rank, boundaries
        self.blocking, self.device, self.via_host = blocking, device, via_host
        self.groups = dict(groups or {})  # tag -> the direction's process group (None: default)
        self.pending: list[tuple[dist.Work | None, torch.Tensor]] = []  # None: not in the group
        self.local: dict[int, deque[torch.Tensor]] = defaultdict(deque)

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
        if self.blocking:
            dist.send(wire, dst, group=group, tag=tag)
        else:
            self.pending.append((dist.isend(wire, dst, group=group, tag=tag), wire))

    def recv(self, ins: Instruction) -> torch.Tensor:
        peer = self.peer_stage(ins)
        tag, src = self.tag(peer, ins.kind), self.stage_to_rank[peer]
        if src == self.rank:
            return self.local[tag].popleft()
        # An activation entering stage s has the shape of boundary s; a gradient coming back
        # into stage s has the shape of stage s's output, boundary s + 1.
        shape, dtype = self.boundaries[
            ins.stage if ins.kind == Kind.RECV_ACTIVATION else ins.stage + 1
        ]
        wire = torch.empty(shape, dtype=dtype, device="cpu" if self.via_host else self.device)
        dist.recv(wire, src, group=self.groups.get(tag), tag=tag)
        return wire.to(self.device) if self.via_host else wire

    def drain(self) -> None:
        """Wait for every posted send (end of an iteration)."""
        for work, _ in self.pending:
            if work is not None:
                work.wait()
        self.pending.clear()


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


__all__ = ["Channels", "directions", "open_directions"]
