"""Read measured pipeline actions from a Chrome trace (PyTorch profiler export).

``torch.distributed.pipelining`` wraps every action in ``record_function("PP:<action>")``
with PyTorch's ``_Action`` text (``PP:2F0``, ``PP:1SEND_F3``, ``PP:0RECV_B1``), so a
profiler trace exported with ``prof.export_chrome_trace(path)`` holds complete events
(``"ph": "X"``, microsecond ``ts``/``dur``) that name stage, action and micro-batch. The
explorer's own compact form (``PP:2RA2b0``) is read too, so a runner can use the same key.
The rank comes from the argument, else Kineto's ``distributedInfo.rank``, else the event's
``pid``. ``UNSHARD``/``RESHARD`` have no counterpart in the schedules and are skipped.
Written from the format, not from torch's code: no torch import.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Optional, Union

from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import Kind, parse_instruction
from explorer.pipeline.schedules.torch_actions import parse_action
from explorer.pipeline.traces.records import MeasuredTrace

_PREFIX = "PP:"

Source = Union[str, Path, Mapping[str, object], list]


def read_chrome_trace(source: Source, rank: Optional[int] = None) -> MeasuredTrace:
    """Every ``PP:`` action of a Chrome trace as a :class:`MeasuredTrace` in seconds.

    ``source`` is a path, the parsed JSON object, or its bare event list.
    """
    doc, name = _load(source)
    events = doc.get("traceEvents", []) if isinstance(doc, Mapping) else doc
    if not isinstance(events, list):
        raise InputError(
            f"{name}: 'traceEvents' must be a list of events, got {type(events).__name__}"
        )
    if rank is None and isinstance(doc, Mapping):
        info = doc.get("distributedInfo")
        if isinstance(info, Mapping) and "rank" in info:
            rank = int(info["rank"])
    records = []
    for ev in events:
        if not isinstance(ev, Mapping) or ev.get("ph") != "X":
            continue
        label = str(ev.get("name", ""))
        if not label.startswith(_PREFIX):
            continue
        parsed = _action(label[len(_PREFIX) :])
        if parsed is None:
            continue
        stage, kind, mb = parsed
        start = float(ev.get("ts", 0.0)) * 1e-6
        who = rank if rank is not None else _pid(ev.get("pid", 0))
        records.append(
            {
                "rank": who,
                "stage": stage,
                "kind": kind,
                "microbatch": mb,
                "start": start,
                "end": start + float(ev.get("dur", 0.0)) * 1e-6,
            }
        )
    return MeasuredTrace.from_records(records, unit="s", source=name)


def _pid(value: object) -> int:
    """A process id used as the rank; anything that is not a plain ASCII integer counts as 0."""
    text = str(value).strip()
    digits = text[1:] if text.startswith("-") else text
    return int(text) if digits.isascii() and digits.isdigit() else 0


def _action(text: str) -> Optional[tuple[int, Kind, int]]:
    """``(stage, kind, micro-batch)`` of one action text, or None for actions without a counterpart."""
    try:
        action = parse_action(text)
    except InputError:
        action = None  # not PyTorch's form: perhaps the explorer's
    if action is not None:
        if action.kind is None:  # UNSHARD, RESHARD, an overlapped pair: no single instruction
            return None
        mb = -1 if action.microbatch is None else action.microbatch
        return action.stage, action.kind, mb
    try:
        ins = parse_instruction(text)
    except InputError:
        raise InputError(
            f"cannot read pipeline action {_PREFIX}{text!r}: expected PyTorch's form like 'PP:2F0' or 'PP:1SEND_F3', or the explorer's like 'PP:2RA2b0'"
        ) from None
    return ins.stage, ins.kind, ins.microbatch


def _load(source: Source) -> tuple[object, str]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            return json.loads(path.read_text()), str(path)
        except FileNotFoundError:
            raise InputError(
                f"no Chrome trace at {path}: export one with prof.export_chrome_trace(path)"
            ) from None
        except json.JSONDecodeError as exc:
            raise InputError(
                f"{path} is not JSON ({exc.msg} at line {exc.lineno}): is it a Chrome trace?"
            ) from None
    return source, "<trace>"


__all__ = ["Source", "read_chrome_trace"]
