"""Ranks folded by their compile stories, and what sets the outliers apart, said in words.

At 4,096 ranks "ranks 0, 1, 2, ..., 4095" is no answer. Ranks that tell the same story
(:func:`~explorer.compile.analysis.story.story_key`) form a :class:`StoryGroup`; the largest
is the majority, told once; every other group is said by what it did that the majority did
not ("rank 517 also compiled 0/1 on guard ..."), and rank sets are written as folded ranges
("ranks 0-516, 518-4095", or "ranks 0-4095 but 517" when that is shorter), never as thousands
of numbers. Pure python.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence

from explorer.compile.analysis.story import RankStory, plain, story_key
from explorer.compile.traces.records import LIMIT_FAILURE, CompileEvent

#: The most ranges written out in a sentence; the rest are counted.
MOST_RANGES = 8
#: The most compiles listed in one story line; the rest are counted.
MOST_COMPILES = 12


def ranges(ranks: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted ranks as inclusive runs: ``[0, 1, 2, 5]`` -> ``[(0, 2), (5, 5)]``."""
    out: list[tuple[int, int]] = []
    for r in sorted(set(ranks)):
        if out and r == out[-1][1] + 1:
            out[-1] = (out[-1][0], r)
        else:
            out.append((r, r))
    return out


def _runs(runs: Sequence[tuple[int, int]]) -> str:
    text = [f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:MOST_RANGES]]
    if len(runs) > MOST_RANGES:
        rest = sum(b - a + 1 for a, b in runs[MOST_RANGES:])
        text.append(f"... ({rest} more ranks in {len(runs) - MOST_RANGES} more ranges)")
    return ", ".join(text)


def who(ranks: Iterable[int], among: Optional[Iterable[int]] = None) -> str:
    """``rank 5``, ``ranks 0-3, 8`` or, when shorter, ``ranks 0-4095 but 517, 2048`` (the span of
    ``ranks`` less the ranks of ``among`` in it that are not in ``ranks``)."""
    mine = sorted(set(ranks))
    if not mine:
        return "no rank"
    if len(mine) == 1:
        return f"rank {mine[0]}"
    listed = f"ranks {_runs(ranges(mine))}"
    if among is None:
        return listed
    inside = set(mine)
    others = [r for r in set(among) if mine[0] < r < mine[-1] and r not in inside]
    if not others:
        return listed
    but = f"ranks {mine[0]}-{mine[-1]} but {_runs(ranges(others))}"
    return but if len(but) <= len(listed) else listed


@dataclass
class StoryGroup:
    """Ranks that tell one story: the story (its lowest rank's) and every rank's compile time."""

    story: RankStory
    ranks: list[int] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)

    @property
    def slowest(self) -> Optional[tuple[float, int]]:
        """The most compile seconds of a rank here, and that rank."""
        timed = [(s, -r) for s, r in zip(self.seconds, self.ranks) if s == s]
        if not timed:
            return None
        most, rank = max(timed)  # the lowest rank of a tie
        return most, -rank

    @property
    def median_seconds(self) -> Optional[float]:
        timed = [s for s in self.seconds if s == s]
        return statistics.median(timed) if timed else None


def fold(stories: Iterable[RankStory]) -> list[StoryGroup]:
    """Ranks grouped by story, the largest group first (ties: the lowest rank first). Iterations
    and verdicts count only when every rank was profiled (see :mod:`.story`)."""
    stories = list(stories)
    every = bool(stories) and all(s.profiled for s in stories)
    return regroup(group(stories, every), every)


def group(stories: Iterable[RankStory], iterations: bool) -> list[StoryGroup]:
    """Ranks grouped by :func:`story_key` (one pass; a reader folds as it reads with :func:`add`)."""
    groups: dict = {}
    for s in stories:
        add(groups, s, iterations)
    return list(groups.values())


def add(groups: dict, story: RankStory, iterations: bool) -> None:
    """Put one rank into its group in ``groups`` (a dict of key -> :class:`StoryGroup`)."""
    key = story_key(story, iterations)
    g = groups.get(key)
    if g is None or story.rank < g.story.rank:
        g = groups[key] = StoryGroup(story, g.ranks if g else [], g.seconds if g else [])
    g.ranks.append(story.rank)
    g.seconds.append(story.seconds if story.seconds is not None else float("nan"))


def regroup(groups: Iterable[StoryGroup], iterations: bool) -> list[StoryGroup]:
    """Groups formed with iterations merged where they tell the same story without them (when
    not every rank was profiled), sorted largest first."""
    merged: dict = {}
    for g in groups:
        key = story_key(g.story, iterations)
        into = merged.get(key)
        if into is None:
            merged[key] = StoryGroup(g.story, list(g.ranks), list(g.seconds))
            continue
        if g.story.rank < into.story.rank:
            into.story = g.story
        into.ranks += g.ranks
        into.seconds += g.seconds
    for g in merged.values():
        order = sorted(range(len(g.ranks)), key=g.ranks.__getitem__)
        g.ranks, g.seconds = [g.ranks[i] for i in order], [g.seconds[i] for i in order]
    return sorted(merged.values(), key=lambda g: (-len(g.ranks), g.ranks[0]))


def _at(c: CompileEvent) -> str:
    return f"at iteration {c.iteration}" if c.iteration >= 0 else "at an unknown iteration"


def _did(c: CompileEvent) -> str:
    """``compiled 0/1 at iteration 5 (forward) on guard ...`` for one compile."""
    verb = "hit the recompile limit at" if c.failed == LIMIT_FAILURE else "compiled"
    guard = f" on guard {c.guard}" if c.guard else ""
    return f"{verb} {c.compile_id} {_at(c)} ({c.function or '?'}){guard}"


def told(story: RankStory) -> str:
    """A story in one clause: its compiles (the first :data:`MOST_COMPILES`) and graph breaks."""
    parts = [_did(c) for c in story.compiles[:MOST_COMPILES]]
    if len(story.compiles) > MOST_COMPILES:
        parts.append(f"... and {len(story.compiles) - MOST_COMPILES} more compiles")
    parts += [f"broke the graph: {b.reason}" for b in story.breaks]
    return "; ".join(parts) or "compiled nothing"


def differences(story: RankStory, majority: RankStory) -> list[str]:
    """What ``story`` did that ``majority`` did not, and the reverse, as clauses."""
    theirs = {(c.compile_id, c.failed): c for c in majority.compiles}
    mine = {(c.compile_id, c.failed): c for c in story.compiles}
    out = [f"also {_did(c)}" for k, c in mine.items() if k not in theirs]
    missing = [c.compile_id for k, c in theirs.items() if k not in mine]
    if missing:
        out.append(f"did not compile {', '.join(missing[:MOST_COMPILES])}")
    for k, c in mine.items():
        other = theirs.get(k)
        if other is None:
            continue
        if c.iteration != other.iteration and c.iteration >= 0 and other.iteration >= 0:
            out.append(
                f"compiled {c.compile_id} at iteration {c.iteration} (the others at {other.iteration})"
            )
        if [plain(r) for r in c.reasons] != [plain(r) for r in other.reasons]:
            out.append(f"compiled {c.compile_id} on guard {c.guard} (the others on {other.guard})")
    own = {b.reason for b in story.breaks}
    others = {b.reason for b in majority.breaks}
    out += [f"also broke the graph: {r}" for r in sorted(own - others)]
    out += [f"did not break the graph at: {r}" for r in sorted(others - own)]
    if (story.cause, story.period) != (majority.cause, majority.period) and not out:
        out.append(f"its own verdict is {_verdict(story)} (the others: {_verdict(majority)})")
    return out or ["tells the same story in other words"]


def _verdict(story: RankStory) -> str:
    return f"{story.cause}" + (f", period {story.period}" if story.period else "")


def stall(group: StoryGroup, majority: StoryGroup) -> Optional[str]:
    """Whether a group's extra compile time matters: in a data-parallel job every rank waits for
    the slowest at its next collective, so the extra seconds are every rank's."""
    mine, theirs = group.median_seconds, majority.median_seconds
    if mine is None or theirs is None or mine <= theirs:
        return None
    return (
        f"{mine:.3g} s compiling against the majority's {theirs:.3g} s: every other rank waits "
        f"about {mine - theirs:.3g} s for it at its next collective"
    )


__all__ = [
    "MOST_COMPILES",
    "MOST_RANGES",
    "StoryGroup",
    "add",
    "differences",
    "fold",
    "group",
    "ranges",
    "regroup",
    "stall",
    "told",
    "who",
]
