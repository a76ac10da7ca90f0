"""P2P conventions users' threads argue about, as transformations of a PyTorch compute+comms order.

The deadlock search judges an order under a P2P model (``blocking``: a send waits for its
receive; ``batched``: sends never wait). What differs between libraries is *where* the
exchanges sit in each rank's order and how they are grouped; each function here rewrites an
order (rank -> actions, :mod:`.torch_actions`) the way one library does, so the same order can
be checked under each convention side by side:

- :func:`defer_receives`: every receive moved to just before the compute that consumes it
  (placed by the consumer; pytorch #172668's ``overlap_pp_comm=False``, #188833's deferred RECV),
  where PyTorch's own lowering posts it as early as the producer's step allows;
- :func:`parity_order`: Megatron's even/odd rule (``p2p_communication.py``; Megatron-LM #5100):
  inside each run of adjacent exchanges, even ranks send first, odd ranks receive first;
- :func:`batches`: which adjacent exchanges one ``batch_isend_irecv`` call posts together
  (PiPPy #969): none, every adjacent run, or one batch per peer in sorted peer order
  (``_sorted_batch_p2p``);
- :func:`communicator_cycle`: NCCL creates a two-rank communicator lazily, at the pair's first
  exchange, and both ranks must enter its creation; ranks that meet their peers in different
  orders wait for each other forever (Megatron-LM #5240).
"""

from __future__ import annotations

from typing import Callable, Optional, TypeGuard

from explorer.pipeline.schedules.torch_actions import ActionType, TorchAction

Order = dict[int, list[Optional[TorchAction]]]
_RECV = (ActionType.RECV_F, ActionType.RECV_B)
_SEND = (ActionType.SEND_F, ActionType.SEND_B)


def _is_comm(a: Optional[TorchAction]) -> TypeGuard[TorchAction]:
    return a is not None and (a.type in _RECV or a.type in _SEND)


def _consumes(recv: TorchAction, a: TorchAction) -> bool:
    if a.stage != recv.stage or a.microbatch != recv.microbatch:
        return False
    if recv.type is ActionType.RECV_F:
        return a.type is ActionType.FORWARD
    return a.type in (ActionType.FULL_BACKWARD, ActionType.BACKWARD_INPUT)


def defer_receives(order: Order) -> Order:
    """Each receive moved to just before its consumer (a receive with no consumer stays where it is)."""
    out: Order = {}
    for rank, acts in order.items():
        recvs = [a for a in acts if a is not None and a.type in _RECV]
        rest = [a for a in acts if a is None or a.type not in _RECV]
        placed: list[Optional[TorchAction]] = []
        pending = list(recvs)
        for a in rest:
            if a is not None:
                mine = [r for r in pending if _consumes(r, a)]
                placed += mine
                pending = [r for r in pending if r not in mine]
            placed.append(a)
        out[rank] = placed + pending
    return out


def parity_order(order: Order) -> Order:
    """Megatron's rule: in each run of adjacent exchanges, even ranks send first, odd ranks receive first.

    Megatron posts a send and a receive in one call only when neither waits for the other (the
    steady state's ``send_forward_recv_backward``: gradient ``j`` back while activation ``i``
    goes out). Where the explorer's order has a receive right after a send it depends on (the
    gradient that can only come back once this activation went out, at the end of GPipe's
    forwards), Megatron makes two calls, so such a receive keeps its place after that send. A
    receive depends on a send when, in ``order`` itself, the message it waits for is sent after
    the send's message arrived (:class:`_Causality`).
    """
    causality = _Causality(order)
    out: Order = {}
    for rank, acts in order.items():
        res: list[Optional[TorchAction]] = []
        run: list[TorchAction] = []

        def flush() -> None:
            res.extend(_sends_first(run) if rank % 2 == 0 else _receives_first(run, causality))
            run.clear()

        for a in acts:
            if _is_comm(a):
                run.append(a)
            else:
                flush()
                res.append(a)
        flush()
        out[rank] = res
    return out


def _sends_first(run: list[TorchAction]) -> list[TorchAction]:
    return [a for a in run if a.type in _SEND] + [a for a in run if a.type not in _SEND]


def _receives_first(run: list[TorchAction], causality: "_Causality") -> list[TorchAction]:
    """Receives ahead of sends, except a receive that depends on a send before it in the run."""
    sent: list[TorchAction] = []
    ahead: list[TorchAction] = []
    behind: list[TorchAction] = []
    for a in run:
        if a.type in _SEND:
            sent.append(a)
            behind.append(a)
        elif any(causality.waits_on(a, s) for s in sent):
            behind.append(a)
        else:
            ahead.append(a)
    return ahead + behind


#: A message: (``"F"`` activation or ``"B"`` gradient, the stage that sends it, micro-batch).
_Message = tuple[str, int, Optional[int]]


def _message(a: TorchAction) -> _Message:
    if a.type is ActionType.SEND_F:
        return ("F", a.stage, a.microbatch)
    if a.type is ActionType.RECV_F:
        return ("F", a.stage - 1, a.microbatch)
    if a.type is ActionType.SEND_B:
        return ("B", a.stage, a.microbatch)
    return ("B", a.stage + 1, a.microbatch)


class _Causality:
    """Which receive waits, through any chain of messages, on which send, in one order.

    Time on a rank is counted in segments: each compute is one, and each run of adjacent
    exchanges is one (Megatron posts it as one call, in no set order). A send's message reaches
    other ranks only through its receive, and what a rank does in a later segment than that
    receive (its sends, and what their receivers do after them) may depend on it. So receive
    ``r`` waits on send ``s`` exactly when ``r``'s message is sent in a later segment than the
    earliest one each rank can be reached in from ``s``'s receive: a forward walk over the
    order's messages.
    """

    def __init__(self, order: Order) -> None:
        self.sent_at: dict[_Message, tuple[int, int]] = {}
        self.received_at: dict[_Message, tuple[int, int]] = {}
        self.sends: dict[int, list[tuple[int, _Message]]] = {}
        for rank, acts in order.items():
            segment, in_run = 0, False
            for a in acts:
                if not _is_comm(a):
                    segment, in_run = segment + 1, False
                    continue
                if not in_run:
                    segment, in_run = segment + 1, True
                if a.type in _SEND:
                    self.sent_at[_message(a)] = (rank, segment)
                    self.sends.setdefault(rank, []).append((segment, _message(a)))
                else:
                    self.received_at[_message(a)] = (rank, segment)

    def waits_on(self, recv: TorchAction, send: TorchAction) -> bool:
        """Whether ``recv``'s message is sent only after ``send``'s message was received (or the
        order does not say: then the receive keeps its place)."""
        if _message(recv) == _message(
            send
        ):  # its own message (DualPipeV's stage to stage on one rank)
            return True
        start = self.received_at.get(_message(send))
        target = self.sent_at.get(_message(recv))
        if start is None or target is None:
            return True
        earliest = {start[0]: start[1]}
        done_above: dict[int, int] = {}  # sends in segments above this were already followed
        work = [start[0]]
        while work:
            rank = work.pop()
            low, high = earliest[rank], done_above.get(rank)
            done_above[rank] = low
            for segment, message in self.sends.get(rank, []):
                if segment <= low or (high is not None and segment > high):
                    continue
                to = self.received_at.get(message)
                if to is not None and (to[0] not in earliest or to[1] < earliest[to[0]]):
                    earliest[to[0]] = to[1]
                    work.append(to[0])
        return target[0] in earliest and target[1] > earliest[target[0]]


BATCHING = ("none", "adjacent", "per-peer")


def batches(
    order: Order, peer_of: Callable[[TorchAction], int], how: str = "adjacent"
) -> dict[int, list[list[TorchAction]]]:
    """Each rank's order as steps: one action each, or adjacent exchanges together (see the module docstring)."""
    if how not in BATCHING:
        raise ValueError(f"batching must be one of {BATCHING}, got {how!r}")
    out: dict[int, list[list[TorchAction]]] = {}
    for rank, acts in order.items():
        steps: list[list[TorchAction]] = []
        run: list[TorchAction] = []

        def flush() -> None:
            if how == "per-peer":
                for peer in sorted({peer_of(a) for a in run}):
                    steps.append([a for a in run if peer_of(a) == peer])
            elif run:
                steps.append(list(run))
            run.clear()

        for a in acts:
            if a is None:
                continue
            if how != "none" and _is_comm(a):
                run.append(a)
                continue
            flush()
            steps.append([a])
        flush()
        out[rank] = steps
    return out


def peer_function(stage_to_rank: dict[int, int]) -> Callable[[TorchAction], int]:
    """The rank at the other end of an exchange: the next stage for activations out, and so on."""

    def peer(a: TorchAction) -> int:
        step = {
            ActionType.SEND_F: 1,
            ActionType.RECV_F: -1,
            ActionType.SEND_B: -1,
            ActionType.RECV_B: 1,
        }
        return stage_to_rank[a.stage + step[a.type]]

    return peer


def communicator_cycle(order: Order, stage_to_rank: dict[int, int]) -> Optional[str]:
    """With lazily created two-rank communicators: the ranks that wait for each other forever, said, or None.

    Each rank creates the communicator of a pair at its first exchange with that peer; creation
    needs both ranks. A rank stuck creating (r, q) waits for q; q may be creating another pair.
    """
    peer = peer_function(stage_to_rank)
    firsts: dict[int, list[int]] = {}
    for rank, acts in order.items():
        seen: list[int] = []
        for a in acts:
            if _is_comm(a) and peer(a) not in seen and peer(a) != rank:
                seen.append(peer(a))
        firsts[rank] = seen
    return communicator_deadlock(firsts)


def communicator_deadlock(firsts: dict[int, list[int]]) -> Optional[str]:
    """Given each rank's peers in order of first exchange, the creation deadlock said, or None."""
    stuck = stuck_creations(firsts)
    if not stuck:
        return None
    start = min(stuck)
    loop = [start]
    while stuck.get(loop[-1]) is not None and stuck[loop[-1]] not in loop:
        loop.append(stuck[loop[-1]])
    return (
        "lazily created communicators deadlock: "
        + "; ".join(
            f"rank {r} creates its communicator with rank {stuck[r]} first"
            for r in loop
            if r in stuck
        )
        + ", so each waits for a peer that is creating another pair"
    )


def stuck_creations(firsts: dict[int, list[int]]) -> dict[int, int]:
    """Each rank that never gets past a communicator creation, and the peer it waits for there
    (empty: every pair is created)."""
    head = {r: 0 for r in firsts}
    progress = True
    while progress:
        progress = False
        for r in sorted(firsts):
            if head[r] >= len(firsts[r]):
                continue
            q = firsts[r][head[r]]
            if q in firsts and head[q] < len(firsts[q]) and firsts[q][head[q]] == r:
                head[r] += 1
                head[q] += 1
                progress = True
    return {r: firsts[r][head[r]] for r in firsts if head[r] < len(firsts[r])}


__all__ = [
    "BATCHING",
    "batches",
    "communicator_cycle",
    "communicator_deadlock",
    "stuck_creations",
    "defer_receives",
    "parity_order",
    "peer_function",
]
