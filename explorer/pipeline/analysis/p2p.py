"""Pair every send with its receive, the way the transport does: first in, first out.

A channel is (sending stage, direction): activations go from stage ``s`` to ``s + 1``, input
gradients from ``s`` to ``s - 1``. On a channel the k-th send meets the k-th receive whatever
micro-batch either believes it carries; so a receive that expects another micro-batch than
its partner sends is a *mismatch*, and a send or receive left over is *unmatched*. Vectorised:
one stable sort per side, no Python object per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from explorer.pipeline.analysis.exchanges import exchanges
from explorer.pipeline.analysis.findings import Mismatch, Unmatched
from explorer.pipeline.analysis.refs import ref
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule


@dataclass(frozen=True)
class Matching:
    """``partner[i]`` is the row of instruction i's partner, or -1 (not P2P or unmatched)."""

    partner: np.ndarray
    unmatched: tuple[Unmatched, ...]
    mismatched: tuple[Mismatch, ...]


def match(schedule: Schedule) -> Matching:
    kind = schedule.kind
    stage = schedule.stage.astype(np.int64)
    n = len(kind)
    facts = exchanges(schedule)
    # channel = 2 * sending stage + direction (0 activation, 1 gradient)
    send_rows, recv_rows = facts.sends, facts.recvs
    send_chan = 2 * stage[send_rows] + (kind[send_rows] == Kind.SEND_GRAD)
    recv_kind = kind[recv_rows]
    recv_src = np.where(
        recv_kind == Kind.RECV_ACTIVATION, stage[recv_rows] - 1, stage[recv_rows] + 1
    )
    recv_chan = 2 * recv_src + (recv_kind == Kind.RECV_GRAD)
    s_rows, r_rows = _fifo_pairs(send_rows, send_chan, recv_rows, recv_chan)
    partner = np.full(n, -1, dtype=np.int64)
    partner[s_rows] = r_rows
    partner[r_rows] = s_rows
    partner.flags.writeable = False  # analyses cache what they derive from it

    unmatched: list[Unmatched] = []
    last = schedule.num_stages - 1
    for row in np.nonzero((facts.cls > 0) & (partner < 0))[0]:
        k, s = Kind(int(kind[row])), int(stage[row])
        peer = s + 1 if k in (Kind.SEND_ACTIVATION, Kind.RECV_GRAD) else s - 1
        r = ref(schedule, int(row))
        if peer < 0 or peer > last:
            why = f"stage {s} step {r.step}: {r.deepspeed_repr} has no stage {peer} to talk to (stages are 0..{last})"
        else:
            verb = "receive" if k.is_send else "send"
            why = f"stage {s} step {r.step}: {r.deepspeed_repr} has no matching {verb} on stage {peer}"
        unmatched.append(Unmatched(at=r, peer_stage=peer, reason=why))

    mb = schedule.microbatch
    bad = np.nonzero(mb[s_rows] != mb[r_rows])[0]
    mismatched = tuple(
        Mismatch(
            send=ref(schedule, s_rows[j]),
            recv=ref(schedule, r_rows[j]),
            sent_microbatch=int(mb[s_rows[j]]),
            expected_microbatch=int(mb[r_rows[j]]),
        )
        for j in bad
    )
    return Matching(partner=partner, unmatched=tuple(unmatched), mismatched=mismatched)


def _fifo_pairs(
    send_rows: np.ndarray, send_chan: np.ndarray, recv_rows: np.ndarray, recv_chan: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(send rows, receive rows) of the pairs: on each channel the k-th send (rows are in
    stream order) meets the k-th receive. Pairs come in send-row order within each channel."""
    if len(send_rows) == 0 or len(recv_rows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    # Channels may be -1 (a receive from before stage 0); shift them to count from 0.
    low = min(int(send_chan.min()), int(recv_chan.min()))
    sc, rc = send_chan - low, recv_chan - low
    channels = max(int(sc.max()), int(rc.max())) + 1
    small = np.uint16 if channels < 2**16 else np.int64  # a stable radix sort when it fits
    s_order = np.argsort(sc.astype(small), kind="stable")
    r_order = np.argsort(rc.astype(small), kind="stable")
    s_count = np.bincount(sc, minlength=channels)
    r_count = np.bincount(rc, minlength=channels)
    s_start = np.cumsum(s_count) - s_count
    r_start = np.cumsum(r_count) - r_count
    s_sorted = sc[s_order]
    ordinal = np.arange(len(sc)) - s_start[s_sorted]
    paired = ordinal < r_count[s_sorted]
    send = send_rows[s_order[paired]]
    recv = recv_rows[r_order[r_start[s_sorted[paired]] + ordinal[paired]]]
    return send, recv


#: The FIFO pairing on given channels (the contract check pairs on rank pairs with it too).
fifo_pairs = _fifo_pairs

__all__ = ["Matching", "fifo_pairs", "match"]
