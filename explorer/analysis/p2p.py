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

from explorer.analysis.findings import Mismatch, Unmatched
from explorer.analysis.refs import ref
from explorer.schedules.instructions import Kind
from explorer.schedules.schedule import Schedule


@dataclass(frozen=True)
class Matching:
    """``partner[i]`` is the row of instruction i's partner, or -1 (not P2P or unmatched)."""

    partner: np.ndarray
    unmatched: tuple[Unmatched, ...]
    mismatched: tuple[Mismatch, ...]


def match(schedule: Schedule) -> Matching:
    kind = schedule.kind.astype(np.int64)
    stage = schedule.stage.astype(np.int64)
    n = len(kind)
    is_sa, is_sg = kind == Kind.SEND_ACTIVATION, kind == Kind.SEND_GRAD
    is_ra, is_rg = kind == Kind.RECV_ACTIVATION, kind == Kind.RECV_GRAD
    # channel = 2 * sending stage + direction (0 activation, 1 gradient)
    send_rows = np.nonzero(is_sa | is_sg)[0]
    recv_rows = np.nonzero(is_ra | is_rg)[0]
    send_chan = 2 * stage[send_rows] + is_sg[send_rows]
    recv_src = np.where(is_ra[recv_rows], stage[recv_rows] - 1, stage[recv_rows] + 1)
    recv_chan = 2 * recv_src + is_rg[recv_rows]
    send_key = _fifo_keys(send_chan, n)
    recv_key = _fifo_keys(recv_chan, n)
    common, si, ri = np.intersect1d(send_key, recv_key, assume_unique=True, return_indices=True)
    partner = np.full(n, -1, dtype=np.int64)
    s_rows, r_rows = send_rows[si], recv_rows[ri]
    partner[s_rows] = r_rows
    partner[r_rows] = s_rows

    unmatched: list[Unmatched] = []
    last = schedule.num_stages - 1
    for row in np.nonzero((is_sa | is_sg | is_ra | is_rg) & (partner < 0))[0]:
        k, s = Kind(int(kind[row])), int(stage[row])
        peer = s + 1 if k in (Kind.SEND_ACTIVATION, Kind.RECV_GRAD) else s - 1
        r = ref(schedule, row)
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


def _fifo_keys(channel: np.ndarray, scale: int) -> np.ndarray:
    """Unique key per (channel, ordinal within channel); rows are already in stream order.

    ``scale`` must exceed any ordinal and be the same for both sides of the matching.
    """
    if len(channel) == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.argsort(channel, kind="stable")
    sorted_chan = channel[order]
    starts = np.r_[0, np.nonzero(np.diff(sorted_chan))[0] + 1]
    first = np.repeat(starts, np.diff(np.r_[starts, len(sorted_chan)]))
    ordinal = np.empty(len(channel), dtype=np.int64)
    ordinal[order] = np.arange(len(channel)) - first
    return channel.astype(np.int64) * (scale + 1) + ordinal


__all__ = ["Matching", "match"]
