"""Every size at once: check a schedule at each (stages, micro-batches) of a range.

A schedule that is right at 4 x 8 can break at 3 x 5; the DeepSpeed thread found its bug at
one size by hand and was never sure the fix held at others. :func:`check_sizes` runs the
whole :func:`~explorer.pipeline.analysis.check` at every size of a range and keeps, per size, the
verdict, the counts of each kind of finding, the first finding (as ``check --json`` says it),
buffers allocated and needed, and the bubble; :attr:`SizeSweep.smallest_failing` is the
smallest broken size (fewest stages, then fewest micro-batches), the case to debug first.

Pure: ``make(stages, microbatches)`` builds the schedule (a generator, a user's class through
the adapter, a schedule with rewrite rules applied). Using several cores is the caller's
business (the command splits the sizes); so is isolating user code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from explorer.errors import InputError
from explorer.pipeline.analysis.check import Communicators, Report, check
from explorer.pipeline.analysis.p2p_models import P2PModel
from explorer.pipeline.analysis.timelines import bubbles_together
from explorer.pipeline.schedules.schedule import Schedule

#: Sizes one sweep may cover: 64 x 1,024 = 65,536 checks is minutes on two cores; more is a typo.
MAX_SIZES = 70_000
#: Largest stage and micro-batch counts a sweep may name (check's own limits stay in force per size).
MAX_STAGES, MAX_MICROBATCHES = 256, 4096
_PART = re.compile(r"^\s*(\d{1,30})\s*(?:-\s*(\d{1,30}))?\s*$")

MakeSchedule = Callable[[int, int], Schedule]
#: What a clean size has none of: every finding kind the check reports.
CLEAN = "no hazard, mismatch, deadlock or wrong gradient count"
#: Sizes checked together (one pass of the simulator's step loop for all of them).
GROUP = 32


@dataclass(frozen=True)
class SizeCell:
    """The verdict at one size. ``skipped`` says why a size does not apply (e.g. interleaving
    needs micro-batches divisible by stages); a skipped size is neither clean nor failing."""

    stages: int
    microbatches: int
    ok: bool
    hazards: int = 0
    mismatches: int = 0
    unmatched: int = 0
    deadlocks: int = 0  # the deadlock under the checked P2P model, and lazy communicators'
    gradients: int = 0  # (stage, micro-batch) weight gradients not exactly once
    first: Optional[dict] = None
    first_words: str = ""
    allocated: tuple[int, ...] = ()
    needed: tuple[int, ...] = ()
    bubble: Optional[float] = None
    skipped: str = ""

    @property
    def failing(self) -> bool:
        return not self.ok and not self.skipped

    @classmethod
    def from_dict(cls, d: dict) -> "SizeCell":
        """The inverse of :meth:`to_dict` (cells come back from the worker processes this way)."""
        return cls(
            int(d["stages"]),
            int(d["microbatches"]),
            bool(d["ok"]),
            hazards=int(d["hazards"]),
            mismatches=int(d["mismatches"]),
            unmatched=int(d["unmatched"]),
            deadlocks=int(d["deadlocks"]),
            gradients=int(d.get("gradients") or 0),
            first=d.get("first"),
            first_words=str(d.get("first_words") or ""),
            allocated=tuple(d.get("allocated") or ()),
            needed=tuple(d.get("needed") or ()),
            bubble=d.get("bubble"),
            skipped=str(d.get("skipped") or ""),
        )

    def to_dict(self) -> dict:
        return {
            "stages": self.stages,
            "microbatches": self.microbatches,
            # a size the schedule does not apply to has no verdict, as the single check at it
            # has none (it refuses the size, exit 2): not a failing "false"
            "ok": None if self.skipped else self.ok,
            "hazards": self.hazards,
            "mismatches": self.mismatches,
            "unmatched": self.unmatched,
            "deadlocks": self.deadlocks,
            "gradients": self.gradients,
            "first": self.first,
            "first_words": self.first_words or None,
            "allocated": list(self.allocated),
            "needed": list(self.needed),
            "bubble": self.bubble,
            "skipped": self.skipped or None,
        }


@dataclass(frozen=True)
class SizeSweep:
    """The cells of one sweep, in (stages, micro-batches) order, and what follows from them."""

    cells: tuple[SizeCell, ...]
    spec: str
    interrupted: bool = False

    @property
    def checked(self) -> list[SizeCell]:
        return [c for c in self.cells if not c.skipped]

    @property
    def clean(self) -> int:
        return sum(c.ok for c in self.checked)

    @property
    def smallest_failing(self) -> Optional[SizeCell]:
        failing = [c for c in self.cells if c.failing]
        return min(failing, key=lambda c: (c.stages, c.microbatches)) if failing else None

    def counts(self) -> dict[str, int]:
        """How many sizes show each kind of finding."""
        return {
            "hazards": sum(c.hazards > 0 for c in self.cells),
            "mismatches": sum(c.mismatches > 0 for c in self.cells),
            "unmatched": sum(c.unmatched > 0 for c in self.cells),
            "deadlocks": sum(c.deadlocks > 0 for c in self.cells),
            "gradients": sum(c.gradients > 0 for c in self.cells),
        }

    def describe(self) -> str:
        """The verdict in words, as ``check --sweep`` prints it."""
        n, skipped = len(self.checked), len(self.cells) - len(self.checked)
        first_skip = next((c for c in self.cells if c.skipped), None)
        tail = (
            f" ({skipped:,} sizes do not apply to this schedule, e.g. {first_skip.stages}x{first_skip.microbatches}: "
            f"{first_skip.skipped[:240]})"
            if first_skip
            else ""
        )
        cut = " (interrupted: only the sizes checked so far)" if self.interrupted else ""
        worst = self.smallest_failing
        if worst is None:
            return f"{CLEAN} at any of {n:,} sizes in {self.spec}{tail}{cut}"
        counts = ", ".join(f"{v:,} with {k}" for k, v in self.counts().items() if v)
        return (
            f"{n - self.clean:,} of {n:,} sizes in {self.spec} have findings ({counts}){tail}{cut}\n"
            f"smallest failing size: {worst.stages} stages x {worst.microbatches} micro-batches: {worst.first_words}"
        )

    def to_dict(self) -> dict:
        worst = self.smallest_failing
        return {
            "kind": "sweep",
            "spec": self.spec,
            "sizes": len(self.checked),
            "clean": self.clean,
            "skipped": len(self.cells) - len(self.checked),
            "interrupted": self.interrupted,
            "counts": self.counts(),
            "smallest_failing": worst.to_dict() if worst else None,
            "cells": [c.to_dict() for c in self.cells],
        }


def parse_sizes(text: str) -> tuple[list[int], list[int]]:
    """``"2-32:1-128"`` or ``"4,8,16:1-64"`` into the stage and micro-batch counts it names."""
    if not isinstance(text, str) or text.count(":") != 1:
        raise InputError(
            f"--sweep {str(text)[:40]!r}: write STAGES:MICROBATCHES, each a range or a list, e.g. 2-32:1-128 or 4,8,16:1-64"
        )
    stages_text, mbs_text = text.split(":")
    stages = _values(stages_text, "stages", MAX_STAGES)
    mbs = _values(mbs_text, "micro-batches", MAX_MICROBATCHES)
    if len(stages) * len(mbs) > MAX_SIZES:
        raise InputError(
            f"--sweep {text}: {len(stages) * len(mbs):,} sizes is more than {MAX_SIZES:,} "
            "(a 64 x 1,024 grid); sweep a smaller range or a list of sizes"
        )
    return stages, mbs


def _values(text: str, what: str, limit: int) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        m = _PART.match(part)
        if not m:
            raise InputError(
                f"--sweep: {what} {part.strip()[:20]!r} is not a count or a range like 2-32"
            )
        a, b = int(m.group(1)), int(m.group(2) or m.group(1))
        if b < a:
            raise InputError(f"--sweep: the {what} range {a}-{b} is reversed; write {b}-{a}")
        if a < 1 or b > limit:
            raise InputError(f"--sweep: {what} must be between 1 and {limit}, got {a}-{b}")
        out.extend(range(a, b + 1))
    values = sorted(set(out))
    if not values:
        raise InputError(f"--sweep: no {what} given")
    return values


@dataclass(frozen=True)
class Asking:
    """How each size is checked, exactly as the single check is asked: the P2P model (None: the
    schedule's own) and how communicators are created. A sweep's cell is the single check's
    verdict at that size only if both are asked the same question."""

    model: Optional[P2PModel] = None
    communicators: Communicators = "eager"


def check_size(
    make: MakeSchedule, stages: int, microbatches: int, asking: Asking = Asking()
) -> SizeCell:
    """The verdict at one size (``InputError`` from the builder: the size does not apply)."""
    return check_group(make, [(stages, microbatches)], asking=asking)[0]


def check_group(
    make: MakeSchedule,
    sizes: Sequence[tuple[int, int]],
    on_build: Optional[Callable[[int, int], None]] = None,
    asking: Asking = Asking(),
) -> list[SizeCell]:
    """The verdicts at several sizes, as :func:`check_size` gives each; the timelines of the
    deadlock-free ones are simulated together (:mod:`.timelines`), which is most of a sweep's
    saving. ``on_build(stages, microbatches)`` is told before each schedule is built (a
    worker's heartbeat, so a size whose builder hangs can be named)."""
    cells: list[Optional[SizeCell]] = [None] * len(sizes)
    simulate: dict[P2PModel, list[tuple[int, Report]]] = {}
    for i, (p, m) in enumerate(sizes):
        if on_build is not None:
            on_build(p, m)
        try:
            schedule = make(p, m)
        except InputError as exc:
            cells[i] = SizeCell(p, m, ok=False, skipped=str(exc))
            continue
        report = check(
            schedule,
            model=asking.model,
            other_model=False,
            timeline=False,
            communicators=asking.communicators,
        )
        if report.findings.deadlock is not None:
            cells[i] = _cell(p, m, report, None)
        else:
            simulate.setdefault(report.model, []).append((i, report))
    for model, pending in simulate.items():
        bubbles = bubbles_together([(r.schedule, r.matching) for _, r in pending], model)
        for (i, report), b in zip(pending, bubbles):
            cells[i] = _cell(*sizes[i], report, b.of_total)
    done = [c for c in cells if c is not None]
    assert len(done) == len(cells)  # each size was skipped, found deadlocked or simulated
    return done


def _cell(stages: int, microbatches: int, report: Report, bubble: Optional[float]) -> SizeCell:
    f = report.findings
    first = f.all()[0] if not f.ok else None
    return SizeCell(
        stages,
        microbatches,
        ok=f.ok,
        hazards=len(f.hazards),
        mismatches=len(f.mismatched),
        unmatched=len(f.unmatched),
        deadlocks=int(f.deadlock is not None) + int(f.communicators is not None),
        gradients=len(f.gradients),
        first=first.to_dict() if first is not None else None,
        first_words=first.describe() if first is not None else "",
        allocated=tuple(report.buffers.allocated),
        needed=tuple(report.buffers.needed),
        bubble=bubble,
    )


def check_sizes(
    make: MakeSchedule,
    stages: Sequence[int],
    microbatches: Sequence[int],
    *,
    spec: str = "",
    on_cell: Optional[Callable[[SizeCell], None]] = None,
    asking: Asking = Asking(),
) -> SizeSweep:
    """Check every size; ``on_cell`` sees each verdict as it comes (progress). Ctrl-C keeps what was checked."""
    cells: list[SizeCell] = []
    try:
        for cell in _each(make, stages, microbatches, asking):
            cells.append(cell)
            if on_cell is not None:
                on_cell(cell)
    except KeyboardInterrupt:
        return SizeSweep(tuple(cells), spec or _spec(stages, microbatches), interrupted=True)
    return SizeSweep(tuple(cells), spec or _spec(stages, microbatches))


def size_groups(
    stages: Sequence[int], microbatches: Sequence[int]
) -> Iterable[list[tuple[int, int]]]:
    """Sizes in (stages, micro-batches) order, in groups checked together: one stage count
    and up to :data:`GROUP` neighbouring micro-batch counts (similar lengths, little padding)."""
    for p in stages:
        for i in range(0, len(microbatches), GROUP):
            yield [(p, m) for m in microbatches[i : i + GROUP]]


def _each(
    make: MakeSchedule, stages: Sequence[int], microbatches: Sequence[int], asking: Asking
) -> Iterable[SizeCell]:
    for group in size_groups(stages, microbatches):
        yield from check_group(make, group, asking=asking)


def _spec(stages: Sequence[int], microbatches: Sequence[int]) -> str:
    def one(values: Sequence[int]) -> str:  # noqa: E306
        values = sorted(values)
        contiguous = values == list(range(values[0], values[-1] + 1))
        return (
            f"{values[0]}-{values[-1]}"
            if contiguous and len(values) > 1
            else ",".join(map(str, values))
        )

    return f"{one(stages)}:{one(microbatches)}"


__all__ = [
    "MAX_SIZES",
    "CLEAN",
    "Asking",
    "MakeSchedule",
    "SizeCell",
    "SizeSweep",
    "parse_sizes",
    "check_size",
    "check_sizes",
]
