"""A schedule under other P2P conventions, its buffer policy kept.

:func:`explorer.pipeline.schedules.torch_csv.with_p2p_conventions` moves exchanges and keeps
each instruction's buffer. A schedule whose buffers are a choice (DeepSpeed's formula, a number
the user gave) must be judged with that choice; one whose buffers are ``minimal`` (the fewest
its own order needs) gets the fewest the *moved* order needs, as it would have been built that
way: otherwise moving a receive ahead of a send would be reported as a buffer reused too early,
a fault of the sizing, not of the convention.
"""

from __future__ import annotations

from explorer.pipeline.analysis.buffers import with_minimal_buffers
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.torch_csv import with_p2p_conventions


def under_conventions(
    schedule: Schedule, receives: str = "as-given", parity: bool = False, batching: str = "none"
) -> Schedule:
    """``schedule`` with its exchanges moved and grouped as asked (itself under the defaults)."""
    moved = with_p2p_conventions(schedule, receives=receives, parity=parity, batching=batching)
    if moved is not schedule and schedule.params.get("buffers") == "minimal":
        return with_minimal_buffers(moved)
    return moved


__all__ = ["under_conventions"]
