"""One record for "why a run did not finish", whatever ran: a pipeline rank, PyTorch's engine,
the XLA child or a compile-probe rank.

Every runtime used to say it its own way (a ``dict`` with five keys, a frozen dataclass with a
``kind``, a bare string), so a widget or the CLI had to know which engine it was reading. Now
each says *where* (rank, stage, step, instruction: ``None`` when not known, e.g. during setup),
*what* (:class:`FailureKind`, the exception's type and message, the last lines of its
traceback or stderr) and *what it did to the others* (``consequences``: the other ranks'
reports that followed from it, e.g. "rank 2: peer gone"). The message stays the one line a
person reads first; everything else is for the machine and the detail view.

Pure python: the CLI's ``--json`` writes :meth:`Failure.to_dict`, and a run folder read back
later (``run --collect``) rebuilds the same record with :meth:`Failure.from_dict`.
"""

from __future__ import annotations

import signal as _signal
import sys
import traceback as _traceback
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Optional

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10 (requires-python) has no StrEnum: str() and format() give the value alike
    from enum import Enum

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return str.__str__(self)


__all__ = [
    "LOST_PEER_WORDS",
    "says_lost_peer",
    "Failure",
    "FailureKind",
    "from_exception",
    "signal_name",
    "tail",
]


class FailureKind(StrEnum):
    """What kind of ending it was; the value is the word written in JSON."""

    #: A rank's own check found a buffer holding another micro-batch's data.
    BUFFER = "buffer"
    #: A rank read another micro-batch's data without failing (a silent wrong result).
    HAZARD = "hazard"
    #: A P2P message did not match the receive it met (shape, dtype, count, a swap).
    CONTRACT = "contract"
    #: The user's or the engine's Python code raised (a pipeline rank says ``error``).
    ERROR = "error"
    #: The same for the XLA child and the compile probe, which always said ``exception``.
    EXCEPTION = "exception"
    #: A neighbour died or closed the connection (a consequence, not a cause).
    PEER = "peer"
    #: No progress within the allowed time (a receive, a step, or the whole run).
    TIMEOUT = "timeout"
    #: Killed by a signal nobody in the run sent (SIGKILL from outside, the OOM killer).
    KILLED = "killed"
    #: Crashed by a fatal signal of its own (SIGABRT from ``Check failed``, SIGSEGV).
    ABORT = "abort"
    #: Exited with a non-zero status and said nothing.
    EXIT = "exit"
    #: Some rank never reported an end (the run was stopped).
    UNFINISHED = "unfinished"
    #: Read back while the run goes on (its launcher holds the folder): no verdict yet.
    RUNNING = "running"
    #: The analysis refused the schedule before anything was started.
    REFUSED = "refused"
    #: The engine cannot run this configuration at all (e.g. PyTorch's order is broken).
    UNSUPPORTED = "unsupported"
    #: Bad input found by the child (the CLI turns it into exit 2).
    INPUT = "input"


@dataclass(frozen=True)
class Failure:
    """Why a run ended badly (see the module docstring)."""

    kind: FailureKind
    message: str
    rank: Optional[int] = None
    stage: Optional[int] = None
    step: Optional[int] = None
    instruction: Optional[str] = None
    exception_type: Optional[str] = None
    traceback_tail: str = ""
    #: What the failure did to the other ranks, one sentence each, in the order they reported.
    consequences: tuple[str, ...] = field(default_factory=tuple)
    #: The process's exit status (negative: the signal that killed it), when a process ended.
    returncode: Optional[int] = None
    signal: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (``kind`` as its word, ``consequences`` as a list)."""
        doc = asdict(self)
        doc["kind"] = str(self.kind)
        doc["consequences"] = list(self.consequences)
        return doc

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> "Failure":
        """The record :meth:`to_dict` wrote (unknown keys ignored; a missing kind is ``error``)."""
        names = set(cls.__dataclass_fields__)
        known = {k: v for k, v in doc.items() if k in names}
        known["kind"] = FailureKind(known.get("kind") or FailureKind.ERROR)
        known["consequences"] = tuple(known.get("consequences") or ())
        known.setdefault("message", "unknown")
        return cls(**known)

    def at(self, **where: Any) -> "Failure":
        """The same failure with its place filled in (rank, stage, step, instruction)."""
        return replace(self, **where)

    def where(self) -> str:
        """``rank 2, stage 2, step 6, SendGrad(buffer_id=0)``: the known parts of the place."""
        parts = [
            f"rank {self.rank}" if self.rank is not None else "",
            f"stage {self.stage}" if self.stage is not None else "",
            f"step {self.step}" if self.step is not None else "",
            self.instruction or "",
        ]
        return ", ".join(p for p in parts if p)

    def describe(self) -> str:
        """The failure in sentences, as a notebook prints it: the place and the message, the
        traceback's tail, then what it did to the other ranks (never the raw record)."""
        lines = [f"{self.where() or 'the run'}: {self.message}"]
        lines += [self.traceback_tail.rstrip()] if self.traceback_tail.strip() else []
        if self.consequences:
            lines.append("consequences:")
            lines += [f"  {c}" for c in self.consequences]
        return "\n".join(lines)


def from_exception(
    exc: BaseException,
    kind: FailureKind = FailureKind.ERROR,
    *,
    message: Optional[str] = None,
    lines: int = 25,
    **where: Any,
) -> Failure:
    """A failure for ``exc`` as it is being handled: its type, ``Type: text`` and traceback tail."""
    text = "".join(_traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Failure(
        kind=kind,
        message=message if message is not None else f"{type(exc).__name__}: {exc}".strip(),
        exception_type=type(exc).__name__,
        traceback_tail=tail(text, lines),
        **where,
    )


#: What gloo and NCCL say in a rank whose neighbour went away (lower case): that rank's failure
#: is a consequence, and the cause is the rank that went. Every product reads them alike.
LOST_PEER_WORDS = (
    "connection closed",
    "connection reset",
    "broken pipe",
    "end of file",
    "socket closed",
)


def says_lost_peer(text: str) -> bool:
    """Whether ``text`` (an error, a rank's last words) says its neighbour went away."""
    low = text.lower()
    return any(word in low for word in LOST_PEER_WORDS)


def signal_name(returncode: Optional[int]) -> Optional[str]:
    """``SIGABRT`` for -6 (a process killed by a signal), else None."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return _signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def tail(text: str, lines: int = 25, chars: int = 4000) -> str:
    """The last lines of ``text``, capped in size."""
    return "\n".join(text.splitlines()[-lines:])[-chars:]
