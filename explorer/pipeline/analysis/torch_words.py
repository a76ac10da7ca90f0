"""A deadlock cycle said in PyTorch's action words, the way a pipelining issue thread says it.

The deadlock search names each stuck rank's first blocked instruction; a user of
``torch.distributed.pipelining`` reads orders like ``[... 0SEND_F1, 2RECV_F0, 2F0]``. For each
rank in the cycle this says which action it is stuck in, which action on the other rank would
release it, and what that action is queued behind:
"rank 0 is stuck in 0SEND_F1 until rank 1 posts 1RECV_F1, which rank 1 only reaches after
1SEND_F0; rank 1 is stuck in 1SEND_F0 until rank 0 posts 2RECV_F0, which rank 0 only reaches
after 0SEND_F1".
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from explorer.pipeline.analysis.findings import Deadlock
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.torch_actions import TYPE_BY_KIND, TorchAction, format_action


def action_text(schedule: Schedule, row: int) -> str:
    """PyTorch's text for one row (the explorer's own for kinds PyTorch lacks)."""
    kind = Kind(int(schedule.kind[row]))
    mb = int(schedule.microbatch[row])
    if kind in TYPE_BY_KIND:
        return format_action(TorchAction.of(int(schedule.stage[row]), kind, mb))
    return f"{int(schedule.stage[row])}{kind.code}{mb if mb >= 0 else ''}"


def cycle_words(
    schedule: Schedule, deadlock: Optional[Deadlock], partner: np.ndarray
) -> Optional[str]:
    """The cycle in PyTorch's words (see the module docstring); None without a cycle."""
    if deadlock is None or not deadlock.cycle:
        return None
    stuck_at = {w.at.rank: w.at.index for w in deadlock.stuck}
    parts = []
    for w in deadlock.cycle:
        row = w.at.index
        other = int(partner[row])
        if other < 0 or w.waits_for_rank is None:
            continue
        peer = w.waits_for_rank
        verb = "posts" if Kind(int(schedule.kind[other])).is_recv else "sends"
        text = (
            f"rank {w.at.rank} is stuck in {action_text(schedule, row)} until rank {peer} "
            f"{verb} {action_text(schedule, other)}"
        )
        blocker = stuck_at.get(peer)
        if blocker is not None and blocker != other:
            text += f", which rank {peer} only reaches after {action_text(schedule, blocker)}"
        parts.append(text)
    return f"cycle under {deadlock.model} P2P: " + "; ".join(parts)


__all__ = ["action_text", "cycle_words"]
