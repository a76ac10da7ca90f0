"""One rank's compile story: what it compiled, on which guards, where its graph broke, its verdict.

A job of thousands of ranks cannot keep every rank's records (a profiled rank holds one record
per iteration); a rank is reduced where it is read to a :class:`RankStory` of a few hundred
bytes, and ranks are grouped by :func:`story_key`: two ranks with the same key tell the same
story. What the key leaves out is what differs between healthy ranks of one job:

* compile seconds and the compile caches' answers (the first rank to compile fills a shared
  cache, the others hit it);
* object addresses and long numbers inside guard texts (``___check_obj_id(L['self'],
  140234...)`` names an address of its own process);
* iterations and the rank's own verdict, unless every rank read was profiled: ranks that were
  not cannot say which iteration compiled, and must not look different for that alone.

Pure python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Hashable, Optional

from explorer.compile.traces.records import CompileEvent, GraphBreak, ProbeResult

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+|\d{6,}")


@dataclass(frozen=True)
class RankStory:
    """What one rank's logs say, small enough to send back from a worker by the thousand."""

    rank: int
    compiles: tuple[CompileEvent, ...]
    breaks: tuple[GraphBreak, ...]
    iterations: int
    profiled: bool
    cause: Optional[str]
    period: Optional[int]
    confidence: Optional[str]
    sentence: str
    seconds: Optional[float]
    notes: tuple[str, ...] = ()


def story_of(rank: int, result: ProbeResult) -> RankStory:
    """The story of one rank's records (its iterations counted, not kept)."""
    d = result.diagnosis
    seconds = [c.seconds for c in result.compiles if c.seconds is not None]
    return RankStory(
        rank=rank,
        compiles=tuple(result.compiles),
        breaks=tuple(result.graph_breaks),
        iterations=len(result.iterations),
        profiled=bool(result.iterations),
        cause=d.cause if d else None,
        period=d.period if d else None,
        confidence=d.confidence if d else None,
        sentence=d.sentence if d else "",
        seconds=sum(seconds) if seconds else None,
        notes=tuple(result.notes),
    )


def plain(text: Optional[str]) -> str:
    """A guard's text without what differs between processes (addresses, long numbers)."""
    return _ADDRESS.sub("#", text or "")


def story_key(story: RankStory, iterations: bool) -> Hashable:
    """What two ranks must share to tell the same story (see the module docstring); with
    ``iterations`` the compiles' iterations and the rank's verdict count too."""
    compiles = tuple(
        (
            c.compile_id,
            c.iteration if iterations else None,
            c.function,
            c.failed,
            tuple(plain(r) for r in (c.reasons or ((c.reason,) if c.reason else ()))),
        )
        for c in story.compiles
    )
    breaks = tuple(sorted({(b.reason, b.detail) for b in story.breaks}))
    verdict = (story.cause, story.period) if iterations else None
    return compiles, breaks, verdict


__all__ = ["RankStory", "plain", "story_key", "story_of"]
