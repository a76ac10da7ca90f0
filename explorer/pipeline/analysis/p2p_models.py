"""What "executing a stream" means under each P2P model, shared by every analysis.

- ``blocking`` (DeepSpeed's engine): a send and its receive are one rendezvous; each rank
  runs its instructions strictly in order.
- ``batched`` (PyTorch's ``batch_isend_irecv``): a rank posts all exchanges of a step
  together at the start of the step - sends first, they never wait - and then waits for its
  receives; a receive completes once its send has been posted.

:func:`execution_order` gives the order in which each rank performs its rows under a model;
:func:`waits_for` and :func:`cycle_of` turn the first stuck row of each rank into the cycle
of waiting stages that explains a deadlock.
"""

from __future__ import annotations

import weakref
from typing import cast

import numpy as np

from explorer.errors import InputError
from explorer.pipeline.analysis.exchanges import RECV, SEND, exchanges
from explorer.pipeline.analysis.findings import MODELS, Deadlock, P2PModel, Waiting
from explorer.pipeline.analysis.refs import ref
from explorer.pipeline.schedules.schedule import Schedule


def check_model(model: str) -> P2PModel:
    """``model`` as a :data:`P2PModel`, or an :class:`InputError` naming the two."""
    if model not in MODELS:
        raise InputError(
            f"unknown P2P model {model!r}: use blocking (DeepSpeed) or batched (PyTorch)"
        )
    return cast(P2PModel, model)


_ORDERS: "weakref.WeakKeyDictionary[Schedule, dict[str, np.ndarray]]" = weakref.WeakKeyDictionary()


def execution_order(schedule: Schedule, model: P2PModel) -> np.ndarray:
    """Row indices in the order ranks perform them (a permutation of the rows).

    Under ``batched``, each run of consecutive exchanges inside a (rank, step) is one batch:
    its sends are posted before its receives are waited for. Other rows keep their place.
    Schedules are immutable, so the order is computed once per schedule and model.
    """
    per_model = _ORDERS.setdefault(schedule, {})
    if model not in per_model:
        order = _execution_order(schedule, model)
        if order is None:  # nothing moves
            order = np.arange(len(schedule))
            key = id(order)
            _IDENTITY[key] = weakref.ref(order, lambda _, key=key: _IDENTITY.pop(key, None))
        order.flags.writeable = False
        per_model[model] = order
    return per_model[model]


#: Orders known to be ``arange(n)`` (by id, checked through a weak reference), so that callers
#: can skip inverting them without comparing every entry.
_IDENTITY: dict[int, "weakref.ref[np.ndarray]"] = {}


def is_identity_order(order: np.ndarray) -> bool:
    """True when ``order`` is an order from :func:`execution_order` known to move nothing."""
    ref_ = _IDENTITY.get(id(order))
    return ref_ is not None and ref_() is order


def _execution_order(schedule: Schedule, model: P2PModel) -> np.ndarray | None:
    """The order, or None when it is the identity."""
    if model == "blocking":
        return None
    cls = exchanges(schedule).cls  # 0 other, SEND (1) or RECV (2)
    # Rows are sorted by (rank, step) with stream order kept, so a segment - a new one at each
    # non-exchange row and at each change of rank or step - only grows along the rows; inside a
    # segment sends go before receives. One stable sort of (segment, class) does it.
    opens = cls == 0
    opens[1:] |= (schedule.rank[1:] != schedule.rank[:-1]) | (
        schedule.step[1:] != schedule.step[:-1]
    )
    if not (~opens[1:] & (cls[:-1] == RECV) & (cls[1:] == SEND)).any():
        return None  # no receive comes before a send of its batch: nothing moves
    segment = np.cumsum(opens, dtype=np.int64)
    return np.argsort(segment * 3 + cls, kind="stable")


def dependency_steps_ok(schedule: Schedule, partner: np.ndarray, model: P2PModel) -> bool:
    """True when every cross-rank wait points to the same or an earlier step.

    Rendezvous pairs (blocking, different ranks) wait both ways, so they must share a step;
    a receive that only waits for its send needs the send no later than itself. Then every
    cycle of waits lies inside one step, which the fast analyses rely on. Both models are
    answered in one pass and kept per schedule and ``partner`` array (``check`` asks three
    times: the deadlock search under each model and the simulation).
    """
    cached = _STEPS_OK.get(schedule)
    if cached is None or cached[0] is not partner:
        cached = (partner, _dependency_steps_ok(schedule, partner))
        _STEPS_OK[schedule] = cached
    return cached[1][model]


_STEPS_OK: "weakref.WeakKeyDictionary[Schedule, tuple[np.ndarray, dict[str, bool]]]" = (
    weakref.WeakKeyDictionary()
)


def _dependency_steps_ok(schedule: Schedule, partner: np.ndarray) -> dict[str, bool]:
    recv = exchanges(schedule).recvs
    recv = recv[partner[recv] >= 0]
    send = partner[recv]
    send_step, recv_step = schedule.step[send], schedule.step[recv]
    in_order = send_step <= recv_step
    batched = bool(in_order.all())
    rdv = schedule.rank[send] != schedule.rank[recv]
    blocking = bool((np.where(rdv, send_step == recv_step, in_order)).all())
    return {"blocking": blocking, "batched": batched}


def deadlock_from_heads(
    schedule: Schedule, partner: np.ndarray, heads: dict[int, int], model: P2PModel
) -> Deadlock:
    """Build the :class:`Deadlock` record from each stuck rank's first blocked row."""
    waiting: dict[int, Waiting] = {}
    for r, row in sorted(heads.items()):
        q = int(partner[row])
        wr = int(schedule.rank[q]) if q >= 0 else None
        ws = int(schedule.stage[q]) if q >= 0 else None
        waiting[r] = Waiting(at=ref(schedule, row), waits_for_rank=wr, waits_for_stage=ws)
    return Deadlock(model=model, cycle=tuple(cycle_of(waiting)), stuck=tuple(waiting.values()))


def cycle_of(waiting: dict[int, Waiting]) -> list[Waiting]:
    """Follow "rank r waits for rank r'" from each stuck rank until a rank repeats."""
    for start in waiting:
        seen: list[int] = []
        r: int | None = start
        while r is not None and r in waiting and r not in seen:
            seen.append(r)
            r = waiting[r].waits_for_rank
        if r is not None and r in seen:
            loop = seen[seen.index(r) :]
            return [waiting[x] for x in loop]
    return []


__all__ = [
    "P2PModel",
    "MODELS",
    "check_model",
    "execution_order",
    "is_identity_order",
    "dependency_steps_ok",
    "deadlock_from_heads",
    "cycle_of",
]
