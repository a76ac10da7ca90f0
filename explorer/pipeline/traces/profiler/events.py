"""One rank's PyTorch profiler trace, reduced to what placing pipeline actions needs.

A profiler trace (``prof.export_chrome_trace``) holds complete events (``"ph": "X"``) with
microsecond ``ts``/``dur`` counted from ``baseTimeNanoseconds``; adding the base puts every
rank of a host on one clock, which is what lets a send on one rank be compared with the
receive on another. The rank is the file's ``distributedInfo.rank`` (Kineto writes it for
every process of a process group), never a guess from the file name.

Kept per event: name, category, start and end in seconds (on the shared clock, before the
job's first event is subtracted) and the autograd ``Sequence number``. That number is what
ties a backward to its forward when nothing is labelled: the forward op that builds an autograd
node takes the next number, and the engine's ``autograd::engine::evaluate_function: ...``
event that runs the node's backward carries the same number. Pure: json and the standard
library; no torch.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt

#: Largest trace read (it is parsed whole; a few profiled iterations are a few MB).
MAX_TRACE_BYTES = 512 * 2**20
#: Asynchronous communication spans: they outlive the call that posted them.
ASYNC_PREFIXES = ("gloo:", "nccl:")
#: Operators that post a point-to-point exchange.
SEND_OPS = ("c10d::send", "c10d::isend")
RECV_OPS = ("c10d::recv_", "c10d::irecv", "c10d::recv")
BACKWARD_PREFIX = "autograd::engine::evaluate_function"
#: Bounds on the times a trace may hold, in microseconds: an epoch-based clock reading
#: (about 1.8e15 us today) fits with centuries to spare, and no event lasts a year.
MAX_TIME_US = 1e17
MAX_DURATION_US = 3.2e13

#: Categories of the host's own events (the profiler's whole-trace span and Python frames set aside).
_NESTING = ("cpu_op", "user_annotation")


@dataclass(frozen=True)
class Event:
    """One complete event: ``start``/``end`` in seconds on the shared clock; ``seq`` autograd's number."""

    name: str
    cat: str
    start: float
    end: float
    seq: Optional[int] = None

    @property
    def is_async(self) -> bool:
        return self.name.startswith(ASYNC_PREFIXES)


@dataclass
class RankTrace:
    """Every complete event of one rank's trace, sorted by start (longest first on ties)."""

    rank: int
    world_size: Optional[int]
    path: str
    events: list[Event] = field(default_factory=list)
    _starts: list[float] = field(default_factory=list, repr=False, compare=False)

    def within(self, span: Event) -> list[Event]:
        """Events that start inside ``span`` (itself excluded); a bisection, so spans cost little."""
        if len(self._starts) != len(self.events):
            self._starts = [e.start for e in self.events]
        lo = bisect.bisect_left(self._starts, span.start)
        hi = bisect.bisect_right(self._starts, span.end)
        return [e for e in self.events[lo:hi] if e is not span]

    def top_level(self) -> list[Event]:
        """Events nested in no other (asynchronous communication spans set aside: they overlap everything)."""
        out: list[Event] = []
        open_end = float("-inf")
        for e in self.events:
            if e.is_async or e.cat not in _NESTING:
                continue
            if e.start >= open_end:
                out.append(e)
                open_end = e.end
        return out


def read_rank_trace(path: Path) -> RankTrace:
    """One profiler trace; InputError (one line, what to change) when it is not one rank's trace."""
    where = f"profiler trace {excerpt(str(path))}"
    # events are read by fixed keys, never recursed into: no walk counting levels (see loads_json)
    text = inputs.read_text(str(path), "profiler trace", MAX_TRACE_BYTES)
    doc = inputs.loads_json(text, where, max_depth=None)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise InputError(
            f"{where} has no 'traceEvents' list: export it with prof.export_chrome_trace"
        )
    info = doc.get("distributedInfo")
    if not isinstance(info, dict):
        info = {}
    rank = info.get("rank")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise InputError(
            f"{where} has no distributedInfo.rank: profile after init_process_group, so the "
            "profiler records which rank wrote the file"
        )
    world = info.get("world_size") if isinstance(info.get("world_size"), int) else None
    base_us = _base_us(doc.get("baseTimeNanoseconds"), where)
    events = [
        ev for ev in (_event(e, base_us, where) for e in doc["traceEvents"]) if ev is not None
    ]
    events.sort(key=lambda e: (e.start, -e.end))
    return RankTrace(rank, world, str(path), events)


def _event(raw: Any, base_us: float, where: str) -> Optional[Event]:
    if not isinstance(raw, dict) or raw.get("ph") != "X":
        return None
    name, ts, dur = raw.get("name"), raw.get("ts"), raw.get("dur", 0.0)
    if not isinstance(name, str) or not isinstance(ts, (int, float)) or isinstance(ts, bool):
        return None
    if not isinstance(dur, (int, float)) or isinstance(dur, bool):
        dur = 0.0
    # A profiler never writes these; placing them would put inf or nan into every figure.
    if not (_within(ts, MAX_TIME_US) and _finite(dur)):
        raise InputError(
            f"{where}: event {excerpt(name)} has ts={_said(ts)}, dur={_said(dur)}: times must be "
            f"finite microseconds of at most {MAX_TIME_US:.0e} (the file is damaged or not a "
            "profiler's)"
        )
    if not 0 <= dur <= MAX_DURATION_US:
        raise InputError(
            f"{where}: event {excerpt(name)} lasts dur={_said(dur)} us: durations must be between "
            f"0 and {MAX_DURATION_US:.0e} us (the file is damaged or not a profiler's)"
        )
    args = raw.get("args")
    seq = args.get("Sequence number") if isinstance(args, dict) else None
    start = (base_us + float(ts)) * 1e-6
    return Event(
        name,
        str(raw.get("cat", "")),
        start,
        start + float(dur) * 1e-6,
        seq if isinstance(seq, int) and not isinstance(seq, bool) else None,
    )


def _base_us(base: Any, where: str) -> float:
    """The trace's clock base in microseconds (0 when it has none), or an InputError.

    Compared before ``float()``: JSON integers have no size limit, and a 401-digit one raises
    OverflowError when converted, where it should be refused like an infinite one.
    """
    if not isinstance(base, (int, float)) or isinstance(base, bool) or not base > 0:
        return 0.0
    if not _within(base, MAX_TIME_US * 1000):
        raise InputError(
            f"{where}: baseTimeNanoseconds {_said(base)} is not a time the profiler writes "
            f"(at most {MAX_TIME_US * 1000:.0e} ns): re-export it with prof.export_chrome_trace"
        )
    return float(base) / 1000.0


def _finite(value: float) -> bool:
    """Not inf or nan, for floats and integers of any size alike.

    ``math.isfinite`` converts an integer to a float first, which raises OverflowError for one
    of a few hundred digits; every integer is finite (and compares with floats exactly).
    """
    return isinstance(value, int) or math.isfinite(value)


def _within(value: float, bound: float) -> bool:
    """Finite and ``|value| <= bound``, without converting an integer to a float."""
    return _finite(value) and abs(value) <= bound


def _said(value: object) -> str:
    """A number as the message quotes it: short, however many digits the file gave."""
    return excerpt(repr(value), 24) if len(repr(value)) > 24 else repr(value)


__all__ = ["Event", "RankTrace", "read_rank_trace"]
