"""What an engine tells the supervisor: which processes to start, and how to read what they report.

An engine (explorer's pipeline, PyTorch's pipelining, DeepSpeed's, the XLA child, the compile
probe's ranks) differs from the others in two things only: the command and environment of each
process (:class:`Child`), and where its processes write their progress (a JSON-lines file per
rank, a marked line on stdout). Everything else - process groups, the stall back-stop, the
grace after a failure, killing, exit codes - is the supervisor's (:mod:`.watch`), the same
for all.

To plug an engine in, subclass :class:`Engine`: return the children from :meth:`Engine.children`,
and either turn piped stdout lines into reports in :meth:`Engine.read_line` or hand over what
the processes appended to files since the last call in :meth:`Engine.read`. Give more grace
after a failure with :meth:`Engine.grace_s` when the others need longer to say their part.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

__all__ = ["Child", "Engine", "Report", "GRACE_S"]

#: After the first process ends badly (or a stall is seen), how long the others get to report.
GRACE_S = 1.5


@dataclass(frozen=True)
class Child:
    """One process to start: its rank, command line and environment.

    Its stderr (and its stdout, unless ``pipe_stdout``) go to ``log``; with ``pipe_stdout`` every
    stdout line is handed to :meth:`Engine.read_line` as it comes. ``warm``: it may be forked
    from a template that imported its ``python -m`` module once for all the run's ranks
    (:mod:`.template`; the supervisor decides, :func:`.warm.warm_plan`); such a module only
    imports at its top and does its work under ``if __name__ == "__main__"``.
    """

    rank: int
    argv: Sequence[str]
    env: Mapping[str, str]
    log: Path
    pipe_stdout: bool = False
    cwd: Optional[Path] = None
    warm: bool = False


@dataclass(frozen=True)
class Report:
    """One progress event a process reported: its rank, what happened (``kind``) and the details."""

    rank: int
    kind: str
    data: Mapping[str, Any] = field(default_factory=dict)


class Engine:
    """The engine side of a supervised run (see the module docstring). Subclass it."""

    def children(self) -> Sequence[Child]:
        """Every process of the run, started in this order."""
        raise NotImplementedError

    def read(self) -> list[Report]:
        """Reports the processes wrote since the last call (files they append to); none by default."""
        return []

    def read_line(self, rank: int, line: str) -> Optional[Report]:
        """A report in one stdout line of a ``pipe_stdout`` child, or None for its own output."""
        return None

    def grace_s(self) -> float:
        """How long the others get to report after a failure or a stall is seen."""
        return GRACE_S
