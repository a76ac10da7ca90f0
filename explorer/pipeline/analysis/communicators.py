"""Lazily created two-rank communicators: does any schedule's exchange order deadlock their creation?

NCCL creates the communicator of a rank pair at the pair's first exchange, and both ranks must
enter the creation (Megatron-LM #5240). This reads each rank's peers in order of first
exchange straight from a schedule's columns (vectorised: a 64 x 1024 schedule has half a million
rows) and hands them to :func:`explorer.pipeline.schedules.torch_p2p.communicator_deadlock`.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from explorer.pipeline.analysis.findings import CommunicatorDeadlock
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.torch_p2p import communicator_deadlock, stuck_creations


def _contacts(schedule: Schedule) -> tuple[dict[int, list[int]], dict[tuple[int, int], int]]:
    """Per rank, its peers in the order of its first exchange with each; and the row of each
    (rank, peer) pair's first exchange (where a creation that never completes is waited for)."""
    kind = schedule.kind.astype(np.int64)
    step = np.where(
        (kind == Kind.SEND_ACTIVATION) | (kind == Kind.RECV_GRAD),
        1,
        np.where((kind == Kind.RECV_ACTIVATION) | (kind == Kind.SEND_GRAD), -1, 0),
    )
    rows = np.nonzero(step != 0)[0]
    other = schedule.stage.astype(np.int64)[rows] + step[rows]
    ok = (other >= 0) & (other < schedule.num_stages)
    rows, other = rows[ok], other[ok]
    s2r = np.asarray(schedule.stage_to_rank, dtype=np.int64)
    rank, peer = schedule.rank.astype(np.int64)[rows], s2r[other]
    keep = rank != peer
    rank, peer, rows = rank[keep], peer[keep], rows[keep]
    width = schedule.num_ranks + 1
    table = np.full(schedule.num_ranks * width + width, -1, dtype=np.int64)
    position = np.arange(len(rows))
    # The last write wins: each pair's first row.
    table[(rank * width + peer)[::-1]] = position[::-1]
    first = table[table >= 0]
    out: dict[int, list[int]] = {r: [] for r in range(schedule.num_ranks)}
    where: dict[tuple[int, int], int] = {}
    for i in sorted(first.tolist()):  # rows are in stream order within a rank
        out[int(rank[i])].append(int(peer[i]))
        where[(int(rank[i]), int(peer[i]))] = int(rows[i])
    return out, where


def first_contacts(schedule: Schedule) -> dict[int, list[int]]:
    """Per rank, its peers in the order of its first exchange with each."""
    return _contacts(schedule)[0]


def lazy_communicator_deadlock(schedule: Schedule) -> Optional[CommunicatorDeadlock]:
    """The creation deadlock of lazily created communicators, or None; pinned to the first stuck
    rank's first exchange with the peer it waits for."""
    firsts, where = _contacts(schedule)
    words = communicator_deadlock(firsts)
    if words is None:
        return None
    stuck = stuck_creations(firsts)
    rank = min(stuck)
    row = where[(rank, stuck[rank])]
    return CommunicatorDeadlock(words, rank, int(schedule.stage[row]), int(schedule.step[row]))


__all__ = ["first_contacts", "lazy_communicator_deadlock"]
