"""Where compile events come from: Dynamo's in-process metrics, or its logs as a fallback.

Dynamo has no public per-compile callback. Since torch 2.5 it keeps one
``CompilationMetrics`` record per compile (``compile_id``, ``recompile_reason``,
``fail_type``, ``restart_reasons`` for graph breaks) in a bounded in-process deque, which is
cheap to read after every iteration: :class:`MetricsSource`. Private APIs move, so
:func:`metrics_supported` checks the fields first, and :class:`LogSource` reads the same
facts from Dynamo's ``recompiles`` / ``graph_breaks`` log artifacts instead (no trace file).
Both hand back records for the iteration that just ran.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, get_args

from explorer.compile.traces.records import (
    LIMIT_FAILURE,
    CompileEvent,
    GraphBreak,
    frame_of,
    limit_failure,
)

_NEEDED_FIELDS = ("compile_id", "co_name", "recompile_reason", "fail_type", "restart_reasons")


def torch_version() -> tuple[int, int]:
    """(major, minor) of the installed torch."""
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    return int(major), int(minor)


def metrics_supported() -> bool:
    """True when this torch keeps compilation metrics with the fields the probe reads."""
    if torch_version() < (2, 5):
        return False
    try:
        from torch._dynamo import utils
    except ImportError:  # pragma: no cover
        return False
    cls = getattr(utils, "CompilationMetrics", None)
    fields = getattr(cls, "__dataclass_fields__", {})
    return hasattr(utils, "get_compilation_metrics") and all(f in fields for f in _NEEDED_FIELDS)


def _split_reason(text: str) -> tuple[str, str]:
    lines = text.strip().splitlines() or [""]
    return lines[0].strip(), "\n".join(lines[1:]).strip()


class MetricsSource:
    """Reads new ``CompilationMetrics`` records after each iteration."""

    name = "metrics"

    def __init__(self) -> None:
        self._seen: set[tuple[Any, ...]] = set()
        self._breaks: dict[str, int] = {}
        #: Each frame's function, from its compiles that name it: the one that hits the
        #: recompile limit carries no ``co_name``, and the trace's reader names it by its frame.
        self._functions: dict[str, str] = {}

    def __enter__(self) -> "MetricsSource":
        from torch._dynamo import utils

        if hasattr(utils, "clear_compilation_metrics"):
            utils.clear_compilation_metrics()
        self._breaks = self._break_counts()
        return self

    @staticmethod
    def _break_counts() -> dict[str, int]:
        """Graph breaks, plus failed inlines (a ``torch.compiler.disable``d hook): both split the graph."""
        from torch._dynamo.utils import counters

        out: dict[str, int] = {}
        for kind in ("graph_break", "inline_call"):
            for reason, n in counters.get(kind, {}).items():
                out[reason] = out.get(reason, 0) + n
        return out

    def _counted_breaks(self, iteration: int, known: set[str]) -> list[GraphBreak]:
        """Graph breaks Dynamo counted but no metrics record carries (e.g. inside a skipped frame)."""
        now = self._break_counts()
        new = [r for r, n in now.items() if n > self._breaks.get(r, 0)]
        self._breaks = now
        out = []
        for text in sorted(new):
            first, detail = _split_reason(text)
            if first not in known:
                out.append(GraphBreak(None, iteration, first, detail))
        return out

    def __exit__(self, *exc: Any) -> None:
        return None

    def drain(self, iteration: int) -> tuple[list[CompileEvent], list[GraphBreak]]:
        """Compile events and graph breaks recorded since the last call."""
        from torch._dynamo.utils import get_compilation_metrics

        events: list[CompileEvent] = []
        breaks: list[GraphBreak] = []
        for r in get_compilation_metrics():
            key = (
                r.compile_id,
                getattr(r, "start_time_us", None) or r.start_time,
                getattr(r, "is_forward", None),
            )
            if key in self._seen:
                continue
            self._seen.add(key)
            # Backward graphs (compiled lazily by AOTAutograd) log their own record: not a compile of a frame.
            if getattr(r, "is_forward", None) is False or (
                r.co_name is None and r.fail_type is None
            ):
                continue
            frame = frame_of(str(r.compile_id))
            if r.co_name:
                self._functions[frame] = r.co_name
            events.append(
                CompileEvent(
                    compile_id=str(r.compile_id),
                    iteration=iteration,
                    function=r.co_name or self._functions.get(frame),
                    reason=r.recompile_reason,
                    failed=limit_failure(r.fail_type, r.fail_reason),
                    seconds=r.entire_frame_compile_time_s,
                )
            )
            for text in sorted(r.restart_reasons or ()):
                first, detail = _split_reason(text)
                breaks.append(GraphBreak(str(r.compile_id), iteration, first, detail))
        breaks.extend(self._counted_breaks(iteration, {b.reason for b in breaks}))
        return events, breaks


class _Capture(logging.Handler):
    """Turns Dynamo's log records into compile events, tagged with the compile id being traced."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.events: dict[str, CompileEvent] = {}
        self.breaks: list[GraphBreak] = []

    def emit(self, record: logging.LogRecord) -> None:
        from torch._guards import CompileContext

        msg = record.getMessage()
        cid = str(CompileContext.current_compile_id() or "?")
        event = self.events.get(cid) or CompileEvent(cid, -1)
        if "torchdynamo start tracing" in msg:
            parts = msg.split("torchdynamo start tracing", 1)[1].split()
            self.events[cid] = CompileEvent(
                cid, -1, parts[0] if parts else None, event.reason, event.failed
            )
        elif msg.startswith("Recompiling function"):
            failures = [ln.strip()[2:] for ln in msg.splitlines() if ln.strip().startswith("- ")]
            name = msg.split()[2] if len(msg.split()) > 2 else None
            self.events[cid] = CompileEvent(
                cid, -1, event.function or name, failures[0] if failures else None, event.failed
            )
        elif "hit config." in msg and "limit" in msg:
            self.events[cid] = CompileEvent(cid, -1, event.function, event.reason, LIMIT_FAILURE)
        elif msg.startswith("Graph break"):
            reason = next(
                (
                    ln.split(":", 1)[1]
                    for ln in msg.splitlines()
                    if ln.startswith("Graph Break Reason:")
                ),
                msg,
            )
            first, detail = _split_reason(reason)
            self.breaks.append(GraphBreak(cid, -1, first, detail))


class LogSource:
    """Parses Dynamo's logs: for a torch whose metrics records lack what the probe needs.

    Enabling the artifacts changes torch's logging state for the duration of the probe;
    afterwards it is reset and re-read from ``TORCH_LOGS``, the state a process starts with.
    """

    name = "log"

    def __init__(self) -> None:
        self._capture = _Capture()

    def __enter__(self) -> "LogSource":
        import torch._logging

        torch._logging.set_logs(dynamo=logging.INFO, recompiles=True, graph_breaks=True)
        logging.getLogger("torch._dynamo").addHandler(self._capture)
        return self

    def __exit__(self, *exc: Any) -> None:
        import torch._logging

        logging.getLogger("torch._dynamo").removeHandler(self._capture)
        torch._logging.set_logs()
        init = getattr(getattr(torch._logging, "_internal", None), "_init_logs", None)
        if init is not None:
            init()

    def drain(self, iteration: int) -> tuple[list[CompileEvent], list[GraphBreak]]:
        """Events logged since the last call, stamped with ``iteration``."""
        cap = self._capture
        events = [
            CompileEvent(e.compile_id, iteration, e.function, e.reason, e.failed)
            for e in sorted(cap.events.values(), key=lambda e: e.compile_id)
        ]
        breaks = [GraphBreak(b.compile_id, iteration, b.reason, b.detail) for b in cap.breaks]
        cap.events, cap.breaks = {}, []
        return events, breaks


#: Where compile records come from: Dynamo's metrics, its log, or metrics when this torch has them.
SourceKind = Literal["auto", "metrics", "log"]


def make_source(kind: SourceKind = "auto") -> Any:
    """``metrics`` (Dynamo's records), ``log`` (log parsing) or ``auto`` (metrics when supported)."""
    from explorer.errors import InputError

    if kind not in get_args(SourceKind):
        raise InputError(f"unknown record source {kind!r}: use auto, metrics or log")
    if kind == "log" or (kind == "auto" and not metrics_supported()):
        return LogSource()
    if kind == "metrics" and not metrics_supported():
        raise InputError(
            f"torch {torch_version()} keeps no usable compilation metrics: use --source log"
        )
    return MetricsSource()


__all__ = [
    "torch_version",
    "metrics_supported",
    "MetricsSource",
    "LogSource",
    "SourceKind",
    "make_source",
]
