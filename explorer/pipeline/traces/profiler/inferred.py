"""Place actions nobody labelled: multi-stage schedules in torch 2.9 and ``Schedule1F1B``.

``ScheduleInterleaved1F1B`` and its siblings wrap no action in a profiler label; a rank's trace
holds only operators and the ``c10d``/``gloo`` exchanges. What is still there:

- **compute blocks**: runs of top-level operators between two exchanges. A backward block is a
  run of ``autograd::engine::evaluate_function: ...`` events; a forward block a run of
  operators that carry an autograd ``Sequence number`` that some backward refers to (so the
  gradient scaling and the batch split, which build no autograd node, are not mistaken for one);
- **which forward a backward undoes**: the backward's events carry the sequence numbers of the
  forward operators whose nodes they run;
- **sends**: a ``c10d::send`` after a block sends that block's output (none after the last
  stage's forward or the first stage's backward), so the last rank's forwards without a send
  are the last stage's, which gives the micro-batches per iteration and the stages per rank.

With one stage per rank (``Schedule1F1B``, ``ScheduleGPipe`` without labels) every stage runs its
forwards in micro-batch order, so the k-th forward block is micro-batch k and each backward takes
its forward's. With several stages per rank the order comes from PyTorch's own schedule classes
(``orders``: a callable giving a class's ``pipeline_order``, supplied by the caller so this module
stays free of torch): the first class whose order matches every rank's blocks, backward links and
sends places them; when none does, the blocks are counted and the report says so.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional

from explorer.pipeline.schedules.torch_actions import ActionType, TorchAction, to_action
from explorer.pipeline.traces.profiler.events import (
    BACKWARD_PREFIX,
    RECV_OPS,
    SEND_OPS,
    Event,
    RankTrace,
)
from explorer.pipeline.traces.profiler.labelled import record

#: PyTorch classes tried, in order, for several stages per rank.
MULTI_STAGE_CLASSES = ("ScheduleInterleaved1F1B", "ScheduleLoopedBFS")
_BOUNDARY = ("Optimizer.step#", "ProfilerStep#")

Orders = Callable[[str, int, int, int], dict]


@dataclass
class Block:
    """One compute block of one rank (see the module docstring)."""

    forward: bool
    first_op: float
    end: float
    free: float  # when the rank finished whatever came before (end of the previous top-level event)
    seqs: set = field(default_factory=set)
    send: Optional[Event] = None
    recv: Optional[Event] = None  # the asynchronous receive whose data arrived last before it
    iteration: int = 0
    link: Optional[int] = None  # backward: index of the forward block it undoes


def blocks(trace: RankTrace) -> list[Block]:
    """The rank's compute blocks in time order, with sends, receives, links and iterations."""
    raw: list[Block] = []
    reporter: dict[
        int, int
    ] = {}  # sequence number -> the last forward block whose operator reported it
    sends: list[Event] = []
    bounds: list[float] = []
    cur: Optional[Block] = None
    last_end = float("-inf")
    for e in trace.top_level():
        backward = e.name.startswith(BACKWARD_PREFIX)
        forward = not backward and e.seq is not None and e.name not in SEND_OPS + RECV_OPS
        if backward or forward:
            if cur is None or cur.forward != forward:
                cur = Block(forward, e.start, e.end, last_end)
                raw.append(cur)
            cur.end = max(cur.end, e.end)
            if e.seq is not None:
                cur.seqs.add(e.seq)
                if forward:
                    reporter[e.seq] = len(raw) - 1
        else:
            if e.name in SEND_OPS:
                sends.append(e)
            if e.name.startswith(_BOUNDARY):
                bounds.append(e.start)
            cur = None
        last_end = max(last_end, e.end)
    # An operator that builds no autograd node reports the counter without taking it; the node's
    # number belongs to the last operator that reported it.
    owned = defaultdict(set)
    for s, i in reporter.items():
        owned[i].add(s)
    refs = {s for b in raw if not b.forward for s in b.seqs}
    keep = [i for i, b in enumerate(raw) if not b.forward or not refs or owned[i] & refs]
    out = [raw[i] for i in keep]
    for i, b in zip(keep, out):
        if b.forward:
            b.seqs = owned[i]
    ends = [b.end for b in out]  # blocks do not overlap, so their ends rise
    for e in sends:  # a send goes out after the block whose output it carries
        i = bisect.bisect_right(ends, e.start) - 1
        if i >= 0 and out[i].send is None:
            out[i].send = e
    recvs = sorted(
        (e for e in trace.events if e.is_async and e.name.endswith(":recv")), key=lambda e: e.end
    )
    recv_ends = [e.end for e in recvs]
    owner = {s: i for i, b in enumerate(out) if b.forward for s in b.seqs}
    groups = _groups(bounds, [b.first_op for b in out])
    for b in out:
        b.iteration = sum(1 for t in groups if t < b.first_op)
        lo = bisect.bisect_left(recv_ends, b.free - 1e-9)
        hi = bisect.bisect_right(recv_ends, b.first_op + 1e-6)
        b.recv = recvs[hi - 1] if hi > lo else None  # the last data to arrive before it
        if not b.forward:
            hits = sorted(owner[s] for s in b.seqs if s in owner)
            b.link = hits[0] if hits else None
    first = min((b.iteration for b in out), default=0)
    for b in out:
        b.iteration -= first
    return out


def _groups(bounds: list[float], starts: list[float]) -> list[float]:
    """One boundary per run of iteration markers with no block between (one optimizer per stage)."""
    out: list[float] = []
    for t in sorted(bounds):
        if out and not any(out[-1] < s < t for s in starts):
            continue
        out.append(t)
    return out


def place_inferred(
    traces: list[RankTrace], orders: Optional[Orders], unplaced: list[str], notes: list[str]
) -> list[dict]:
    """Records for ranks whose traces label nothing (all of ``traces``), or [] with the reasons said."""
    found = {t.rank: blocks(t) for t in traces}
    world = max(t.world_size or 0 for t in traces) or len(traces)
    last = world - 1
    if last not in found:
        unplaced.append(
            f"the last rank ({last}) has no trace: without it the micro-batches per iteration "
            "cannot be counted, so no unlabelled action is placed"
        )
        return []
    per_it: dict[int, list[Block]] = defaultdict(list)
    for b in found[last]:
        per_it[b.iteration].append(b)
    tail = per_it[max(per_it)] if per_it else []
    m = sum(1 for b in tail if b.forward and b.send is None)
    total_f = sum(1 for b in tail if b.forward)
    if m == 0 or total_f % m:
        unplaced.append(
            f"rank {last}: {total_f} forward blocks, {m} without a send: no whole number of stages "
            "per rank fits, so the unlabelled blocks are not placed"
        )
        return []
    chunks = total_f // m
    if chunks == 1:
        notes.append(
            f"no action labels: one stage per rank, {m} micro-batches per iteration (read from the "
            "last rank's forwards without a send); forwards in micro-batch order, each backward "
            "matched to its forward by autograd sequence numbers"
        )
        return _place_single_stage(found, m, unplaced)
    if orders is None:
        unplaced.append(f"{chunks} stages per rank and no schedule order to match them against")
        return []
    tried = []
    for name in MULTI_STAGE_CLASSES:
        try:
            order = orders(name, world, m, chunks)
        except Exception as exc:  # noqa: BLE001 - a class that rejects the size is just not it
            tried.append(f"{name} ({type(exc).__name__})")
            continue
        plan = {
            int(r): [a for a in (to_action(x) for x in acts) if a is not None and a.type.is_compute]
            for r, acts in order.items()
        }
        placed = _match(found, plan, world * chunks, name)
        if placed is not None:
            notes.append(
                f"no action labels: {chunks} stages per rank, {m} micro-batches per iteration; "
                f"every rank's compute blocks, backward links and sends match PyTorch's {name} order"
            )
            return placed
        tried.append(name)
    counts = ", ".join(
        f"rank {r}: {sum(b.forward for b in bs)} forward / {sum(not b.forward for b in bs)} backward blocks"
        for r, bs in sorted(found.items())
    )
    unplaced.append(
        f"{chunks} stages per rank, {m} micro-batches: no schedule order matches the blocks "
        f"({counts}; tried {', '.join(tried)}); give the order with --from FILE.csv"
    )
    return []


def _place_single_stage(found: dict, m: int, unplaced: list[str]) -> list[dict]:
    out: list[dict] = []
    stages = len(found)
    for rank, bs in sorted(found.items()):
        fwd_index: dict[int, int] = {}
        count: dict[int, int] = defaultdict(int)
        for i, b in enumerate(bs):
            if b.forward:
                fwd_index[i] = count[b.iteration]
                count[b.iteration] += 1
        for i, b in enumerate(bs):
            mb = (
                fwd_index.get(i)
                if b.forward
                else fwd_index.get(b.link if b.link is not None else -1)
            )
            if mb is None:
                unplaced.append(
                    f"rank {rank}: a backward block at {b.first_op:.6f} s undoes no forward seen in the trace"
                )
                continue
            out += _records(rank, b, rank, mb, stages)
    return out


def _match(found: dict, plan: dict, stages: int, name: str) -> Optional[list[dict]]:
    out: list[dict] = []
    for rank, bs in sorted(found.items()):
        acts = plan.get(rank, [])
        n = len(acts)
        if not n or len(bs) % n:
            return None
        for i, b in enumerate(bs):
            a = acts[i % n]
            if b.forward != (a.type is ActionType.FORWARD):
                return None
            sends = a.stage != (stages - 1 if b.forward else 0)
            if (b.send is not None) != sends:
                return None
            if not b.forward:
                if b.link is None or b.link // n != i // n:
                    return None
                f = acts[b.link % n]
                if (f.stage, f.microbatch) != (a.stage, a.microbatch):
                    return None
            out += _records(rank, b, a.stage, a.microbatch, stages, i // n)
    return out


def _records(
    rank: int, b: Block, stage: int, mb: int, stages: int, iteration: Optional[int] = None
) -> list[dict]:
    it = b.iteration if iteration is None else iteration
    f = b.forward
    needs_input = stage > 0 if f else stage < stages - 1
    compute = TorchAction(stage, ActionType.FORWARD if f else ActionType.FULL_BACKWARD, mb)
    start = b.free if needs_input and b.recv is not None else b.first_op
    rec = record(rank, compute, it, start, b.end, "inferred")
    out = []
    if needs_input and b.recv is not None:
        rt = ActionType.RECV_F if f else ActionType.RECV_B
        recv = record(rank, TorchAction(stage, rt, mb), it, b.recv.start, b.recv.end, "inferred")
        recv["arrived"] = rec["arrived"] = b.recv.end
        rec["wait"] = min(max(b.recv.end - start, 0.0), b.end - start)
        out.append(recv)
    out.append(rec)
    if b.send is not None:
        st = ActionType.SEND_F if f else ActionType.SEND_B
        out.append(
            record(rank, TorchAction(stage, st, mb), it, b.send.start, b.send.end, "inferred")
        )
    return out


__all__ = ["MULTI_STAGE_CLASSES", "Block", "blocks", "place_inferred"]
