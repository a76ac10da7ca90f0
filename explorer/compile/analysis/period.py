"""Period detection in per-iteration times and in the sequence of variants that ran.

Two questions, two methods. A sequence of labels (which cached variant ran) either repeats
exactly or it does not, so :func:`label_period` tests exact repetition. Times are noisy, and
how much evidence a period needs depends on how big it is against that noise: the seed's
cycle is 196, 196, 192 TFLOPS (a 2 % dip) and needs many cycles before it is told apart from
noise, while an iteration that takes 100 ms against 1 ms is a period after three cycles.

:func:`find_time_period` groups iterations by ``iteration % k`` and weighs, for each k, the
slow phase's excess over the other phases against the noise inside phases (estimated from
pairs of iterations in the same phase, so neither the period itself nor one stray slow
iteration inflates it). The bar it must clear depends on the number of cycles seen:

* four or more cycles: the excess is at least ``min_effect`` of the median and either
  ``min_ratio`` noise widths with the slow phase slow in most cycles, or (when the periodic
  work itself varies, as an optimizer step does on a busy machine) the slow phase ranks above
  the rest by ``rank_z`` standard deviations (a *confirmed* period);
* three cycles: the slow phase is slower than every other iteration in every cycle, by at
  least ``thin_effect`` of the median and ``thin_ratio`` noise widths (a *tentative* period:
  "seen over 3 cycles; run more iterations to confirm");
* fewer: never a period.

The smallest passing k wins, because every multiple of a true period passes too. A property
test over thousands of noise-only series bounds how often noise passes (tests/compile).
Pure python.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import combinations
from math import exp, lgamma
from statistics import median
from typing import Hashable, Optional, Sequence

#: Cycles a period needs to be called confirmed; below that (down to THIN_CYCLES) it is tentative.
CONFIRMED_CYCLES = 4
#: Fewest cycles in which a (very large) period is reported at all.
THIN_CYCLES = 3
#: Median |a - b| of two draws of a normal noise is 0.954 sigma: pairwise spread -> sigma.
_PAIR_TO_SIGMA = 1 / 0.9539


@dataclass(frozen=True)
class PeriodEvidence:
    """A period in times, with how strongly the data supports it.

    ``phase`` is the slow phase (``iteration % period``); ``cycles`` how many times every
    phase was seen; ``effect`` the slow phase's excess over the rest as a share of the rest;
    ``strength`` that excess in noise widths (sigma).
    """

    period: int
    phase: int
    cycles: int
    effect: float
    strength: float
    confirmed: bool

    def describe(self) -> str:
        """``period 4, confirmed over 6 cycles`` or ``period 4, seen over 3 cycles; run more iterations to confirm``."""
        return describe_period(self.period, self.cycles, self.confirmed)


def describe_period(period: int, cycles: int, confirmed: bool) -> str:
    """How sure a period is, in the words every report uses."""
    if confirmed:
        return f"period {period}, confirmed over {cycles} cycles"
    return f"period {period}, seen over {cycles} cycles; run more iterations to confirm"


def label_period(labels: Sequence[Hashable], min_cycles: int = 2) -> Optional[int]:
    """The smallest k >= 2 with ``labels[i] == labels[i + k]`` everywhere, seen ``min_cycles`` times.

    A constant sequence has no period (``None``): nothing alternates.
    """
    n = len(labels)
    if n < 2 * min_cycles or len(set(labels)) < 2:
        return None
    for k in range(2, n // min_cycles + 1):
        if all(labels[i] == labels[i + k] for i in range(n - k)):
            return k
    return None


def _noise(groups: Sequence[Sequence[float]]) -> float:
    """Noise width (sigma) from absolute differences of pairs inside the same phase.

    Pairs within a phase carry no period; the median of their differences ignores a few
    stray slow iterations, and it has no zero residual per phase to bias it low.
    """
    diffs = [abs(a - b) for g in groups for a, b in combinations(g[:32], 2)]
    return median(diffs) * _PAIR_TO_SIGMA if diffs else 0.0


def _rank_z(slow: Sequence[float], rest: Sequence[float]) -> float:
    """How far the slow phase ranks above the rest, in standard deviations (Mann-Whitney U, normal approximation).

    On a busy machine the periodic work itself varies a lot, so its excess over the noise is
    modest even when it is slower in nearly every cycle; ranks see that and ignore how big
    the stray iterations are. Only many cycles can reach the bar (four cycles of 2 phases
    top out near z = 2.6), so it never speaks for thin evidence.
    """
    # Pairs counted by bisection (n log n, not every pair in Python). A NaN is neither above
    # nor equal to anything, so it counts for no pair, as a comparison of the pair would say.
    ordered = sorted(r for r in rest if r == r)
    above = 0.0
    for s in (s for s in slow if s == s):
        below, not_above = bisect_left(ordered, s), bisect_right(ordered, s)
        above += below + 0.5 * (not_above - below)
    n1, n2 = len(slow), len(rest)
    return (above - n1 * n2 / 2) / ((n1 * n2 * (n1 + n2 + 1) / 12) ** 0.5)


def _share_above(values: Sequence[float], bar: float) -> float:
    return sum(v > bar for v in values) / len(values)


def _chance(n: int, slow_total: int, size: int, hits: int) -> float:
    """P(a phase of ``size`` iterations, drawn at random from ``n``, holds >= ``hits`` of the ``slow_total`` slow ones).

    The hypergeometric tail: how easily stray slow iterations (a garbage-collection pause, a
    busy neighbour) pile up in one phase by chance. Multiplied by the number of phases tried
    so far, it bounds the false periods found among many candidate periods.
    """

    def log_comb(a: int, b: int) -> float:
        return lgamma(a + 1) - lgamma(b + 1) - lgamma(a - b + 1) if 0 <= b <= a else float("-inf")

    total = log_comb(n, size)
    terms = [
        log_comb(slow_total, x) + log_comb(n - slow_total, size - x) - total
        for x in range(hits, min(size, slow_total) + 1)
    ]
    return sum(exp(t) for t in terms if t > -700)


def _evidence(
    k: int, groups: dict[int, list[float]], overall: float, params: dict[str, float], tested: int
) -> Optional[PeriodEvidence]:
    """The evidence for period ``k`` (grouped as ``groups``), or None when it falls short.

    Each test's cheap parts come first and the noise width (every pair inside each phase) is
    measured only for a k that passed them: a series of pure noise tries every k up to
    ``max_period``, and nearly all of them fail on the cheap parts. The verdicts are the same
    as measuring it first: every condition is pure, only their order of evaluation changed.
    """
    medians = {p: median(g) for p, g in groups.items()}
    slow = max(medians, key=medians.__getitem__)
    others = [medians[p] for p in medians if p != slow]
    rest = median(others)
    excess = medians[slow] - rest
    effect = excess / rest if rest > 0 else float("inf")
    if excess < params["min_effect"] * overall:
        return None  # too small to matter whatever the noise: the cheap test first
    widths: list[float] = []

    def sigma() -> float:
        if not widths:
            widths.append(max(_noise(list(groups.values())), 1e-3 * overall, 1e-12))
        return widths[0]

    cycles = min(len(g) for g in groups.values())
    slow_values = groups[slow]
    rest_values = [t for p, g in groups.items() if p != slow for t in g]
    if cycles >= CONFIRMED_CYCLES:
        bar = max(others) + (medians[slow] - max(others)) / 3
        above = sum(t > bar for t in slow_values)
        if (
            above >= 0.75 * len(slow_values)
            and _share_above(rest_values, bar) <= 0.25
            and excess / sigma() >= params["min_ratio"]
            # The slow phase must itself be tight: stray slow iterations (GC, a busy machine)
            # that happen to share a phase differ wildly from each other; periodic work repeats.
            and excess >= 2.0 * _noise([slow_values])
        ):
            chance = _chance(
                len(rest_values) + len(slow_values),
                above + sum(t > bar for t in rest_values),
                len(slow_values),
                above,
            )
            if chance * tested <= params["alpha"]:
                return PeriodEvidence(k, slow, cycles, effect, excess / sigma(), True)
        upper = sorted(rest_values)[(3 * len(rest_values)) // 4]
        if (
            _share_above(slow_values, upper) >= 0.75  # slow in most cycles: not a mix of two phases
            and _rank_z(slow_values, rest_values) >= params["rank_z"]
        ):
            return PeriodEvidence(k, slow, cycles, effect, excess / sigma(), True)
    lowest_slow, highest_rest = min(slow_values), max(rest_values)
    if (
        cycles >= THIN_CYCLES
        and lowest_slow > highest_rest
        and effect >= params["thin_effect"]
        and (lowest_slow - highest_rest) / sigma() >= params["thin_ratio"]
    ):
        return PeriodEvidence(k, slow, cycles, effect, excess / sigma(), cycles >= CONFIRMED_CYCLES)
    return None


def find_time_period(
    indices: Sequence[int],
    times: Sequence[float],
    min_effect: float = 0.01,
    min_ratio: float = 4.0,
    thin_effect: float = 0.25,
    thin_ratio: float = 8.0,
    rank_z: float = 4.0,
    alpha: float = 0.01,
    max_period: int = 64,
) -> Optional[PeriodEvidence]:
    """The smallest period k >= 2 in ``times`` and its evidence (see the module docstring), or None.

    ``indices`` are the iteration numbers of ``times`` (warm-up iterations may be left out,
    so the phase comes from the iteration number, not the position).
    """
    if len(indices) != len(times):
        raise ValueError(f"indices ({len(indices)}) and times ({len(times)}) differ in length")
    n = len(times)
    if n < 2 * THIN_CYCLES:
        return None
    overall = median(times)
    params = {
        "min_effect": min_effect,
        "min_ratio": min_ratio,
        "thin_effect": thin_effect,
        "thin_ratio": thin_ratio,
        "rank_z": rank_z,
        "alpha": alpha,
    }
    tested = 0
    for k in range(2, min(n // THIN_CYCLES, max_period) + 1):
        groups: dict[int, list[float]] = {}
        for i, t in zip(indices, times):
            groups.setdefault(i % k, []).append(t)
        if len(groups) < k or min(len(g) for g in groups.values()) < THIN_CYCLES:
            continue
        tested += k
        found = _evidence(k, groups, overall, params, tested)
        if found is not None and not _a_mix(found, indices, times, groups):
            return found
    return None


def _a_mix(found: PeriodEvidence, indices: Sequence[int], times: Sequence[float], groups) -> bool:
    """Whether the slow phase at ``found.period`` k is a mix of a slow and a normal phase of a
    longer period m*k: then k is not the period. Every 4th iteration slow makes phase 1 of
    k = 2 half slow; with little noise that half can rank it above the rest, and 2 would be
    said for 4. A sub-phase of at least THIN_CYCLES iterations whose median is within three
    noise widths of the other phases' median is normal; a true slow phase has none (its work
    may vary from cycle to cycle, but not down to the rest's level)."""
    k, slow = found.period, found.phase
    others = [g for p, g in groups.items() if p != slow]
    level = median([t for g in others for t in g])
    bar = level + 3.0 * _noise(others)
    for m in range(2, len(times) // (k * THIN_CYCLES) + 1):
        parts: dict[int, list[float]] = {}
        for i, t in zip(indices, times):
            if i % k == slow:
                parts.setdefault(i % (m * k), []).append(t)
        if any(len(g) >= THIN_CYCLES and median(g) <= bar for g in parts.values()):
            return True
    return False


def time_period(indices: Sequence[int], times: Sequence[float]) -> Optional[int]:
    """The period :func:`find_time_period` finds with its defaults, confirmed or tentative (None when none)."""
    found = find_time_period(indices, times)
    return found.period if found else None


def phase_medians(indices: Sequence[int], times: Sequence[float], k: int) -> dict[int, float]:
    """Median time of each phase ``iteration % k``."""
    phases: dict[int, list[float]] = {}
    for i, t in zip(indices, times):
        phases.setdefault(i % k, []).append(t)
    return {p: median(v) for p, v in sorted(phases.items())}


__all__ = [
    "CONFIRMED_CYCLES",
    "THIN_CYCLES",
    "PeriodEvidence",
    "describe_period",
    "label_period",
    "find_time_period",
    "time_period",
    "phase_medians",
]
