"""Period detection in per-iteration times and in the sequence of variants that ran.

Two questions, two methods. A sequence of labels (which cached variant ran) either repeats
exactly or it does not, so :func:`label_period` tests exact repetition. Times are noisy: the
seed's cycle is 196, 196, 192 TFLOPS, a 2% dip, so :func:`time_period` groups iterations by
``iteration % k`` and asks whether the phases differ by much more than the noise inside a
phase (a robust between/within ratio with medians, so one stray slow iteration does not make
a period). The smallest period that passes wins, because every multiple of a true period
passes too. Pure python.
"""

from __future__ import annotations

from statistics import median
from typing import Hashable, Optional, Sequence


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


def _mad(values: Sequence[float]) -> float:
    """Median absolute deviation: the noise inside one phase, unmoved by one outlier."""
    m = median(values)
    return median(abs(v - m) for v in values)


def _consistent(groups: dict[int, list[float]], share: float = 0.75) -> bool:
    """The slow phase is slow in most cycles, not made slow by one or two outliers.

    The bar sits a third of the way from the next-slowest phase to the slow one: periodic
    work such as an optimizer step varies a lot under load (its cycles spread upwards), so a
    midpoint bar rejected real periods on a busy machine.
    """
    medians = {p: median(g) for p, g in groups.items()}
    slow = max(medians, key=medians.get)
    others = [medians[p] for p in medians if p != slow]
    threshold = max(others) + (medians[slow] - max(others)) / 3
    above = sum(t > threshold for t in groups[slow]) / len(groups[slow])
    below = [t < threshold for p, g in groups.items() if p != slow for t in g]
    return above >= share and sum(below) / len(below) >= share


def phase_medians(indices: Sequence[int], times: Sequence[float], k: int) -> dict[int, float]:
    """Median time of each phase ``iteration % k``."""
    phases: dict[int, list[float]] = {}
    for i, t in zip(indices, times):
        phases.setdefault(i % k, []).append(t)
    return {p: median(v) for p, v in sorted(phases.items())}


def time_period(
    indices: Sequence[int],
    times: Sequence[float],
    min_cycles: int = 4,
    min_effect: float = 0.01,
    min_ratio: float = 4.0,
) -> Optional[int]:
    """The smallest k >= 2 for which the phases ``iteration % k`` have clearly different times.

    ``indices`` are the iteration numbers of ``times`` (warm-up iterations may be left out,
    so the phase comes from the iteration number, not the position). A phase split counts
    when the spread of phase medians is at least ``min_effect`` of the overall median and
    ``min_ratio`` times the pooled within-phase noise, with every phase seen ``min_cycles``
    times.
    """
    if len(indices) != len(times):
        raise ValueError(f"indices ({len(indices)}) and times ({len(times)}) differ in length")
    n = len(times)
    if n < 2 * min_cycles:
        return None
    overall = median(times)
    for k in range(2, n // min_cycles + 1):
        groups: dict[int, list[float]] = {}
        for i, t in zip(indices, times):
            groups.setdefault(i % k, []).append(t)
        if len(groups) < k or min(len(g) for g in groups.values()) < min_cycles:
            continue
        medians = [median(g) for g in groups.values()]
        spread = max(medians) - min(medians)
        noise = median(_mad(g) for g in groups.values())
        if spread >= min_effect * overall and spread >= min_ratio * max(noise, 1e-9 * overall):
            if _consistent(groups):
                return k
    return None
