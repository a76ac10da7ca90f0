"""When a followed job has stopped moving: the rule, with the clock given by the caller.

A job is *stalled* when no rank has written a new line for longer than the stall time. The
stall time is the user's (``stall_after_s``), or by default :data:`FACTOR` times the longest
silence the job has already had *and ended by writing again*, never below :data:`FLOOR_S`:

- the job's own rhythm sets the bar: a job whose iterations pause for data loading, an
  evaluation or a checkpoint has already shown those silences, so one of that length is not
  a stall, and a step three times slower than the slowest seen is still "running";
- the floor keeps a job whose steps take milliseconds from being called stalled by a hiccup
  of the machine (a busy CPU, a swap, the follower's own poll interval);
- a silence only counts while it lasts: the moment any rank writes again the job is running,
  and that silence becomes part of its rhythm (a job that is merely slow is never left stalled).

Before the first line there is no rhythm (imports, rendezvous, a first compile can take
minutes): a job is never called stalled before it has written anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from explorer.errors import InputError

#: The default stall time is this many times the longest silence already seen...
FACTOR = 5.0
#: ... and never less than this many seconds.
FLOOR_S = 10.0


@dataclass
class StallWatch:
    """The stall rule for one job (see the module docstring); times are the caller's clock, in s."""

    #: The user's stall time; None: the default rule (:data:`FACTOR` x the longest silence, >= floor).
    stall_after_s: Optional[float] = None
    #: When a rank last wrote a line (None: nothing written yet).
    last_progress: Optional[float] = None
    #: The longest silence so far that ended with a new line.
    longest_silence_s: float = 0.0
    #: How many times progress was seen (which stall a diagnosis belongs to: one per stall).
    progress_count: int = 0

    def __post_init__(self) -> None:
        if self.stall_after_s is not None and not self.stall_after_s > 0:
            raise InputError(
                f"stall_after_s must be a positive number of seconds, got {self.stall_after_s!r} "
                "(or leave it out for the default rule)"
            )

    def progressed(self, now: float) -> None:
        """A rank wrote something new at ``now``: the silence before it joins the job's rhythm."""
        if self.last_progress is not None:
            self.longest_silence_s = max(self.longest_silence_s, now - self.last_progress)
        self.last_progress = now
        self.progress_count += 1

    def threshold_s(self) -> float:
        """The stall time in force: the user's, else the default rule."""
        if self.stall_after_s is not None:
            return self.stall_after_s
        return max(FLOOR_S, FACTOR * self.longest_silence_s)

    def stalled_for(self, now: float) -> Optional[float]:
        """Seconds of silence at ``now`` when the job is stalled, None while it is not."""
        if self.last_progress is None:
            return None
        silent = now - self.last_progress
        return silent if silent > self.threshold_s() else None


def stall_words(seconds: float) -> str:
    """``stalled for 42 s`` (whole seconds: the status line is redrawn at every poll)."""
    return f"stalled for {int(seconds)} s"


__all__ = ["FACTOR", "FLOOR_S", "StallWatch", "stall_words"]
