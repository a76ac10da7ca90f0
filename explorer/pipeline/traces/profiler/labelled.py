"""Place actions a schedule labelled: ``PP:<action>`` (``_PipelineScheduleRuntime``) and ``Forward i``/``Backward i``.

``_PipelineScheduleRuntime`` wraps every action in ``record_function("PP:<action>")`` with
PyTorch's action text, so stage, type and micro-batch are in the name; a ``RECV_F``/``RECV_B``
only posts the receive, and the asynchronous ``gloo:recv`` span it starts ends when the data
has arrived. The compute that needs the data waits for it inside its own span.

Single-stage schedules (``ScheduleGPipe``) label ``Forward i``/``Backward i`` with the
micro-batch only: a single-stage schedule runs stage = the rank's place in the pipeline,
which is the rank in a one-dimensional pipeline group (said in the notes). The receive and the
send of a micro-batch happen inside its span and are placed from the ``c10d`` operators there.

Each record is the shape ``explorer run --engine torch`` writes: rank, stage, action, kind (the
explorer's code), microbatch, iteration (the k-th time a rank ran this action), start, end in
seconds, and for receives and the computes that need them ``arrived`` (when the data was there).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Optional

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.torch_actions import (
    ActionType,
    TorchAction,
    format_action,
    parse_action,
)
from explorer.pipeline.traces.profiler.events import RECV_OPS, SEND_OPS, Event, RankTrace

PP_PREFIX = "PP:"
_SINGLE = re.compile(r"^(Forward|Backward) (\d+)$")


def record(
    rank: int, action: TorchAction, iteration: int, start: float, end: float, how: str
) -> dict:
    """One placed action in the run's record shape."""
    assert action.kind is not None
    return {
        "rank": rank,
        "stage": action.stage,
        "action": format_action(action),
        "kind": action.kind.code,
        "microbatch": -1 if action.microbatch is None else action.microbatch,
        "iteration": iteration,
        "start": start,
        "end": end,
        "wait": 0.0,
        "arrived": None,
        "placed_by": how,
    }


def has_pp_labels(trace: RankTrace) -> bool:
    return any(e.name.startswith(PP_PREFIX) for e in trace.events)


def has_single_labels(trace: RankTrace) -> bool:
    return any(_SINGLE.match(e.name) for e in trace.events)


def _arrival(trace: RankTrace, span: Event) -> Optional[float]:
    """End of the first asynchronous receive posted inside ``span``: when its data arrived."""
    for e in trace.within(span):
        if e.is_async and e.name.endswith(":recv"):
            return e.end
    return None


def place_pp(trace: RankTrace, unplaced: list[str], notes: list[str]) -> list[dict]:
    """Every ``PP:`` action of one rank; what has no single instruction goes to ``unplaced``."""
    seen: Counter = Counter()
    out: list[dict] = []
    skipped: Counter = Counter()
    for e in trace.events:
        if not e.name.startswith(PP_PREFIX):
            continue
        text = e.name[len(PP_PREFIX) :]
        try:
            action = parse_action(text)
        except InputError:
            unplaced.append(f"rank {trace.rank}: label {e.name!r} is not an action")
            continue
        if action is None or action.kind is None:
            if action is not None and action.type is ActionType.OVERLAP_F_B:
                unplaced.append(
                    f"rank {trace.rank}: {text} runs a forward and a backward in one span; "
                    "their times cannot be told apart"
                )
            else:
                skipped[action.type.value if action else "empty"] += 1
            continue
        it = seen[text]
        seen[text] += 1
        rec = record(trace.rank, action, it, e.start, e.end, "label")
        if action.kind in (Kind.RECV_ACTIVATION, Kind.RECV_GRAD):
            rec["arrived"] = _arrival(trace, e)
        out.append(rec)
    if skipped:
        said = ", ".join(f"{n} {t}" for t, n in sorted(skipped.items()))
        notes.append(
            f"rank {trace.rank}: {said} (FSDP's parameter gathering) have no schedule instruction"
        )
    _feed_computes(out)
    return out


def place_single(trace: RankTrace, notes: list[str]) -> list[dict]:
    """``Forward i``/``Backward i`` spans of one rank: compute, and the exchanges inside each span."""
    seen: Counter = Counter()
    out: list[dict] = []
    stage = trace.rank
    for e in trace.events:
        m = _SINGLE.match(e.name)
        if not m:
            continue
        forward, mb = m[1] == "Forward", int(m[2])
        it = seen[e.name]
        seen[e.name] += 1
        compute = TorchAction(
            stage, ActionType.FORWARD if forward else ActionType.FULL_BACKWARD, mb
        )
        rec = record(trace.rank, compute, it, e.start, e.end, "label")
        inner = trace.within(e)
        for op in inner:
            if op.name in RECV_OPS:
                t = ActionType.RECV_F if forward else ActionType.RECV_B
                recv = record(trace.rank, TorchAction(stage, t, mb), it, op.start, op.end, "label")
                recv["arrived"] = _arrival(trace, e)
                recv["end"] = max(op.end, recv["arrived"] or op.end)
                out.append(recv)
            elif op.name in SEND_OPS:
                t = ActionType.SEND_F if forward else ActionType.SEND_B
                out.append(
                    record(trace.rank, TorchAction(stage, t, mb), it, op.start, op.end, "label")
                )
        out.append(rec)
    notes.append(
        f"rank {trace.rank}: Forward i / Backward i labels name no stage; a single-stage schedule "
        f"runs one stage per rank, taken as stage {stage}"
    )
    _feed_computes(out)
    return sorted(out, key=lambda r: r["start"])


def _feed_computes(records: list[dict]) -> None:
    """Give each compute the arrival of the receive it needs (same stage, micro-batch, iteration)."""
    arrivals = {
        (r["stage"], r["kind"], r["microbatch"], r["iteration"]): r["arrived"]
        for r in records
        if r["arrived"] is not None
    }
    needs = {Kind.FORWARD.code: Kind.RECV_ACTIVATION.code, Kind.BACKWARD.code: Kind.RECV_GRAD.code}
    needs[Kind.BACKWARD_INPUT.code] = Kind.RECV_GRAD.code
    for r in records:
        src = needs.get(r["kind"])
        got = arrivals.get((r["stage"], src, r["microbatch"], r["iteration"])) if src else None
        if got is not None:
            r["arrived"] = got
            r["wait"] = min(max(got - r["start"], 0.0), r["end"] - r["start"])


__all__ = ["has_pp_labels", "has_single_labels", "place_pp", "place_single", "record"]
