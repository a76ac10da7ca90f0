"""Search for the fix, and prove it: which rewrite rules remove every finding at every size.

The DeepSpeed thread found its bug at one size by hand; a posted fix was withdrawn, and the
reporter warned that reordering one exchange pair breaks the pairing with the neighbouring
stage unless it is reordered too. :func:`search_fixes` tries every combination of up to
``max_rules`` rules (:mod:`explorer.pipeline.analysis.rules`) and sweeps each over the whole range
(:mod:`explorer.pipeline.analysis.sizes`): a candidate is *proven* over the range when no size has a
hazard, a mismatch or a deadlock; a rejected one keeps the smallest size where it fails and
that finding in words (a reorder that breaks pairing names the deadlock it causes).
Candidates are ranked by fewest buffers, then shortest makespan, then fewest rules, all read
at one reference size (4 x 8 when the range has it).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Callable, Optional, Sequence

from explorer.pipeline.analysis.check import check
from explorer.pipeline.analysis.rules import RULES, Rule, apply_rules
from explorer.pipeline.analysis.sizes import MakeSchedule, SizeSweep, check_sizes
from explorer.pipeline.schedules.schedule import Schedule
from explorer.pipeline.schedules.streams import stream_header, stream_lines


@dataclass(frozen=True)
class Candidate:
    """One combination of rules and what sweeping it showed."""

    rules: tuple[Rule, ...]
    sweep: SizeSweep
    buffers: tuple[int, ...]
    makespan: Optional[float]

    @property
    def proven(self) -> bool:
        return (
            self.sweep.smallest_failing is None
            and bool(self.sweep.checked)
            and not self.sweep.interrupted
        )

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    def rank_key(self) -> tuple:
        return (
            sum(self.buffers),
            self.makespan if self.makespan is not None else float("inf"),
            len(self.rules),
        )

    def to_dict(self) -> dict:
        worst = self.sweep.smallest_failing
        return {
            "rules": self.names,
            "descriptions": [r.description for r in self.rules],
            "proven": self.proven,
            "proven_over": self.sweep.spec if self.proven else None,
            "sizes_checked": len(self.sweep.checked),
            "buffers": list(self.buffers),
            "makespan": self.makespan,
            "fails_at": worst.to_dict() if worst else None,
        }


@dataclass(frozen=True)
class FixSearch:
    """The baseline's sweep, the proven candidates best first, and the rejected ones."""

    baseline: SizeSweep
    candidates: tuple[Candidate, ...]
    rejected: tuple[Candidate, ...]
    reference: tuple[int, int]
    diffs: dict

    def to_dict(self) -> dict:
        worst = self.baseline.smallest_failing
        return {
            "kind": "fix",
            "spec": self.baseline.spec,
            "reference_size": list(self.reference),
            "baseline": {
                "clean": self.baseline.clean,
                "sizes": len(self.baseline.checked),
                "smallest_failing": worst.to_dict() if worst else None,
            },
            "candidates": [
                c.to_dict() | {"diff": self.diffs.get(tuple(c.names), "")} for c in self.candidates
            ],
            "rejected": [c.to_dict() for c in self.rejected],
        }

    def describe(self) -> str:
        """Candidates in words, each with a -/+ listing and its proof, then what was rejected and why."""
        out = [f"baseline: {self.baseline.describe()}"]
        if self.baseline.smallest_failing is None:
            out.append("nothing to fix: the schedule is clean over the whole range")
        p, m = self.reference
        for i, c in enumerate(self.candidates, 1):
            words = "; then ".join(r.description for r in c.rules)
            out.append(f"\ncandidate {i}: {' + '.join(c.names)}: {words}")
            diff = self.diffs.get(tuple(c.names))
            if diff:
                out.append(diff)
            span = f"makespan {c.makespan:g} ticks" if c.makespan is not None else "no timeline"
            out.append(
                f"proof: no finding at any of {len(c.sweep.checked):,} sizes in {c.sweep.spec}; "
                f"buffers per stage at {p}x{m}: {','.join(map(str, c.buffers))}; {span}"
            )
        if self.rejected:
            out.append("\nrejected:")
            for c in self.rejected:
                worst = c.sweep.smallest_failing
                why = (
                    f"fails at {worst.stages}x{worst.microbatches}: {worst.first_words}"
                    if worst
                    else "nothing was checked"
                )
                out.append(f"  {' + '.join(c.names)}: {why}")
        return "\n".join(out)


def search_fixes(
    make: MakeSchedule,
    stages: Sequence[int],
    microbatches: Sequence[int],
    *,
    rules: Sequence[Rule] = tuple(RULES.values()),
    max_rules: int = 2,
    spec: str = "",
    sweep: Optional[Callable[..., SizeSweep]] = None,
) -> FixSearch:
    """Sweep the baseline and every combination of up to ``max_rules`` rules (see the module docstring).

    ``sweep(rules, stages, microbatches, spec)`` sweeps ``make`` with ``rules`` applied; by default
    here, one size after another; the command passes one that uses every core.
    """
    if sweep is None:

        def sweep(
            rules: Sequence[Rule], p: Sequence[int], m: Sequence[int], spec: str
        ) -> SizeSweep:
            return check_sizes(_with(make, rules), p, m, spec=spec)

    baseline = sweep((), stages, microbatches, spec)
    once = _once_per_size(make)  # the reference size and the listing: one build per size
    reference = (4, 8) if 4 in stages and 8 in microbatches else (stages[0], microbatches[-1])
    proven, rejected = [], []
    for combo in rule_combinations(rules, max_rules):
        result = sweep(combo, stages, microbatches, spec)
        try:
            report = check(_with(once, combo)(*reference), other_model=False)
            buffers, makespan = (
                tuple(report.buffers.allocated),
                (report.timeline.makespan if report.timeline else None),
            )
        except Exception:  # noqa: BLE001 - the reference size may not apply; the sweep said what does
            buffers, makespan = (), None
        cand = Candidate(tuple(combo), result, buffers, makespan)
        (proven if cand.proven else rejected).append(cand)
    proven.sort(key=Candidate.rank_key)
    # A combination that only adds rules to a proven one is not a new fix: keep the smallest.
    kept: list[Candidate] = []
    for c in proven:
        if not any(set(k.names) < set(c.names) for k in kept):
            kept.append(c)
    worst = baseline.smallest_failing
    at = (worst.stages, worst.microbatches) if worst else reference
    prefer = (worst.first or {}).get("stage") if worst else None
    diffs = {tuple(c.names): stage_diff(once, c.rules, at, prefer) for c in kept}
    return FixSearch(baseline, tuple(kept), tuple(rejected), reference, diffs)


def rule_combinations(
    rules: Sequence[Rule] = tuple(RULES.values()), max_rules: int = 2
) -> list[tuple[Rule, ...]]:
    """Every combination of 1 to ``max_rules`` rules, in the order the search tries them."""
    return [combo for k in range(1, max_rules + 1) for combo in combinations(rules, k)]


def _once_per_size(make: MakeSchedule) -> MakeSchedule:
    """``make`` remembering its schedules (they are immutable): a ``--from`` class runs in a
    child process per call, so asking it once per size instead of once per combination counts."""
    built: dict[tuple[int, int], Schedule] = {}

    def build(p: int, m: int) -> Schedule:
        if (p, m) not in built:
            built[(p, m)] = make(p, m)
        return built[(p, m)]

    return build


def _with(make: MakeSchedule, rules: Sequence[Rule]) -> MakeSchedule:
    def build(p: int, m: int) -> Schedule:
        return apply_rules(make(p, m), rules)

    return build


def stage_diff(
    make: MakeSchedule, rules: Sequence[Rule], size: tuple[int, int], prefer: Optional[int] = None
) -> str:
    """A ``-``/``+`` listing at ``size`` (the thread's format) of the rank that holds stage
    ``prefer`` (where the baseline failed) if the rules change it, else of the first they change."""
    before = check(make(*size), other_model=False)
    after = check(apply_rules(make(*size), rules), other_model=False)
    ranks = list(range(before.schedule.num_ranks))
    if prefer is not None and 0 <= prefer < before.schedule.num_stages:
        first = before.schedule.stage_to_rank[prefer]
        ranks = [first] + [r for r in ranks if r != first]
    for rank in ranks:
        old = [stream_header(before.schedule, rank), *stream_lines(before.schedule, rank)]
        new = [stream_header(after.schedule, rank), *stream_lines(after.schedule, rank)]
        if old != new:
            lines = [f"  rank {rank} at {size[0]}x{size[1]}:"]
            for a, b in zip(old, new):
                lines.extend([f"  - {a}", f"  + {b}"] if a != b else [f"    {a}"])
            return "\n".join(lines)
    return ""


__all__ = ["Candidate", "FixSearch", "search_fixes", "stage_diff"]
