"""Read torch_xla's ``PT_XLA_DEBUG_LEVEL`` output into typed events.

With ``PT_XLA_DEBUG_LEVEL=2`` and ``PT_XLA_DEBUG_FILE``, torch_xla appends one "Compilation
Analysis" block per compile and one "Execution Analysis" block per execution, each with the
cause, the graph hash, input/output counts and the Python frames that triggered it. These
blocks are the only place that names the graph hash of a cached execution, and the only
statement of *why* torch_xla compiled (e.g. "most likely user code trying to access tensor
value before torch_xla.sync"). The child records the file's size after each step, so each
step's events are one slice of the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal, Optional

_PREFIX = re.compile(r"^(Compilation|Execution) Analysis: ?(.*)$")
_HASH = re.compile(r"Graph Hash:\s*(\S+)")
_INPUTS = re.compile(r"Number of Graph Inputs:\s*(\d+)")
_OUTPUTS = re.compile(r"Number of Graph Outputs:\s*(\d+)")

#: What an analysis block of ``XLA_DEBUG`` output reports: a graph compiled or a graph ran.
DebugEventKind = Literal["compile", "execute"]


@dataclass
class DebugEvent:
    """One analysis block: ``kind`` is ``compile`` or ``execute``."""

    kind: DebugEventKind
    cause: str = ""
    graph_hash: str = ""
    inputs: Optional[int] = None
    outputs: Optional[int] = None
    frames: list[str] = field(default_factory=list)


def parse_debug(text: str) -> list[DebugEvent]:
    """Every analysis block in ``text``, in file order (blocks without a graph hash are dropped)."""
    events: list[DebugEvent] = []
    current: Optional[DebugEvent] = None
    section = ""
    for line in text.splitlines():
        m = _PREFIX.match(line)
        if not m:
            continue
        kind = "compile" if m.group(1) == "Compilation" else "execute"
        body = m.group(2)
        stripped = body.strip()
        if stripped.startswith("====="):
            if current is not None and current.graph_hash:
                events.append(current)
            current = None if current is not None else DebugEvent(kind)
            section = ""
            continue
        if current is None:
            current = DebugEvent(kind)
        if stripped.endswith("Cause") and not body.startswith(" "):
            section = "cause"
        elif stripped.startswith("Graph Info"):
            section = "info"
        elif stripped.startswith("Python Frame"):
            section = "frames"
        elif stripped.startswith("-----"):
            section = ""
        elif section == "cause" and stripped:
            current.cause = (current.cause + " " + stripped).strip()
        elif section == "info":
            for rx, attr in ((_HASH, "graph_hash"), (_INPUTS, "inputs"), (_OUTPUTS, "outputs")):
                hit = rx.search(stripped)
                if hit:
                    value = hit.group(1)
                    setattr(current, attr, value if attr == "graph_hash" else int(value))
        elif section == "frames" and stripped:
            current.frames.append(stripped)
    if current is not None and current.graph_hash:
        events.append(current)
    return events


def cut_short(text: str) -> Optional[str]:
    """Why ``text`` is not a whole log (None when it is): torch_xla ends every line, and closes
    every analysis block with a line of ``=``. A log cut while being written (the process killed,
    the file copied early or truncated) drops what came after, which may be the recompile, so a
    reader must not give its "no new graph" verdict from it."""
    if text and not text.endswith("\n"):
        return "ends in a cut line"
    open_block = False
    for line in text.splitlines():
        m = _PREFIX.match(line)
        if m and m.group(2).strip().startswith("====="):
            open_block = not open_block
    return "ends inside an analysis block" if open_block else None


def slice_events(text: str, offsets: list[int]) -> tuple[list[DebugEvent], list[list[DebugEvent]]]:
    """Split the file at byte offsets: events before ``offsets[0]`` (setup), then one list per step."""
    data = text.encode("utf-8")
    bounds = [0, *offsets]
    setup = (
        parse_debug(data[: bounds[1]].decode("utf-8", "replace")) if offsets else parse_debug(text)
    )
    per_step = [
        parse_debug(data[a:b].decode("utf-8", "replace")) for a, b in zip(bounds[1:], bounds[2:])
    ]
    return setup, per_step


__all__ = ["DebugEventKind", "DebugEvent", "cut_short", "parse_debug", "slice_events"]
