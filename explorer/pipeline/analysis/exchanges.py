"""Which rows are sends and receives, derived once per schedule.

Matching, the execution order, the deadlock search and the timeline all start from the same
facts about the kind column; each used to derive them with its own comparisons over every
row. Schedules are immutable, so the facts are kept per schedule (weakly: they go with it).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

SEND, RECV = 1, 2
#: Per kind: 0 not an exchange, SEND or RECV.
EXCHANGE_CLASS = np.zeros(len(Kind), dtype=np.int8)
EXCHANGE_CLASS[[Kind.SEND_ACTIVATION, Kind.SEND_GRAD]] = SEND
EXCHANGE_CLASS[[Kind.RECV_ACTIVATION, Kind.RECV_GRAD]] = RECV


@dataclass(frozen=True, eq=False)
class Exchanges:
    """Read-only per-schedule facts: ``cls`` per row (0, SEND or RECV, int8), and the rows of
    the sends and of the receives in ascending order."""

    cls: np.ndarray
    sends: np.ndarray
    recvs: np.ndarray


_CACHE: "weakref.WeakKeyDictionary[Schedule, tuple[np.ndarray, Exchanges]]" = (
    weakref.WeakKeyDictionary()
)


def exchanges(schedule: Schedule) -> Exchanges:
    """The :class:`Exchanges` of ``schedule`` (computed on first use, one table lookup)."""
    hit = _CACHE.get(schedule)
    if hit is not None and hit[0] is schedule.kind:
        return hit[1]
    cls = EXCHANGE_CLASS[schedule.kind.astype(np.intp)]  # an intp index: numpy's fast path
    facts = Exchanges(cls=cls, sends=np.flatnonzero(cls == SEND), recvs=np.flatnonzero(cls == RECV))
    for column in (facts.cls, facts.sends, facts.recvs):
        column.flags.writeable = False
    _CACHE[schedule] = (schedule.kind, facts)
    return facts


__all__ = ["EXCHANGE_CLASS", "Exchanges", "RECV", "SEND", "exchanges"]
