"""Periods on thin evidence: a huge effect seen three times is a period (tentative), a 2 % dip needs more cycles.

The false-period rate on noise-only series is bounded by a property test over thousands of
series from four noise families (normal, log-normal, quantised timer readings, and rare 2-5x
spikes such as garbage-collection pauses). The probe itself is checked on a real 16-iteration
loop whose every 4th iteration sleeps 100 ms.
"""

from __future__ import annotations

import math
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.compile.analysis.period import _rank_z, find_time_period

#: Most false periods tolerated per noise-only series (measured: about 0.1 %).
FALSE_PERIOD_RATE = 0.01


def _noise(rng: random.Random, family: str, n: int) -> list[float]:
    base = rng.uniform(0.5, 200.0)
    out = []
    for _ in range(n):
        if family == "normal":
            t = base * (1 + rng.gauss(0, rng.choice([0.003, 0.02, 0.05])))
        elif family == "lognormal":
            t = base * math.exp(rng.gauss(0, 0.1))
        elif family == "quantised":
            t = round(base * (1 + rng.gauss(0, 0.02)), 1)
        else:
            t = base * (1 + rng.gauss(0, 0.01)) * (rng.uniform(2, 5) if rng.random() < 0.1 else 1)
        out.append(t)
    return out


def test_false_periods_on_pure_noise_are_rare() -> None:
    rng = random.Random(20261124)
    found, total = {}, {}
    for _ in range(3000):
        family = rng.choice(["normal", "lognormal", "quantised", "spikes"])
        n = rng.randint(8, 60)
        total[family] = total.get(family, 0) + 1
        if find_time_period(list(range(n)), _noise(rng, family, n)) is not None:
            found[family] = found.get(family, 0) + 1
    for family, n in total.items():
        assert found.get(family, 0) / n <= FALSE_PERIOD_RATE, (family, found, total)


@pytest.mark.slow
def test_false_periods_stay_rare_over_long_series() -> None:
    """Hundreds of iterations mean dozens of candidate periods and thousands of phases to fluke in."""
    rng = random.Random(7)
    found, total = {}, {}
    for _ in range(1500):
        family = rng.choice(["normal", "lognormal", "quantised", "spikes"])
        n = rng.randint(60, 300)
        total[family] = total.get(family, 0) + 1
        if find_time_period(list(range(n)), _noise(rng, family, n)) is not None:
            found[family] = found.get(family, 0) + 1
    for family, n in total.items():
        assert found.get(family, 0) / n <= FALSE_PERIOD_RATE, (family, found, total)


@settings(deadline=None, max_examples=80)
@given(seed=st.integers(0, 10**6), first=st.integers(0, 3), effect=st.floats(3.0, 200.0))
def test_a_huge_effect_seen_three_times_is_a_tentative_period(
    seed: int, first: int, effect: float
) -> None:
    """16 iterations, warm-up left out: phases of period 4 are seen 3 or 4 times."""
    rng = random.Random(seed)
    idx = list(range(2 + first % 2, 16))
    times = [(effect if i % 4 == 3 else 1.0) * (1 + rng.gauss(0, 0.05)) for i in idx]
    found = find_time_period(idx, times)
    assert found is not None and found.period == 4 and found.phase == 3
    assert not found.confirmed and found.cycles == 3
    assert found.describe() == "period 4, seen over 3 cycles; run more iterations to confirm"


def test_a_two_percent_dip_needs_more_cycles() -> None:
    rng = random.Random(3)
    thin = list(range(2, 16))
    assert (
        find_time_period(
            thin, [(1.02 if i % 4 == 3 else 1.0) * (1 + rng.gauss(0, 0.003)) for i in thin]
        )
        is None
    )
    many = list(range(2, 50))
    found = find_time_period(
        many, [(1.02 if i % 4 == 3 else 1.0) * (1 + rng.gauss(0, 0.003)) for i in many]
    )
    assert found is not None and (found.period, found.confirmed) == (4, True)
    assert found.describe().startswith("period 4, confirmed over 12 cycles")


def test_stray_slow_iterations_sharing_a_phase_are_not_a_period() -> None:
    """Three GC-like pauses of different lengths that happen to fall in one phase of 4."""
    idx = list(range(2, 18))
    times = [1.0] * len(idx)
    for i, t in ((3, 2.1), (7, 4.8), (11, 1.0), (15, 3.3)):
        times[idx.index(i)] = t
    assert find_time_period(idx, times) is None


def test_the_probe_finds_a_thin_period_four_in_a_real_sixteen_iteration_loop() -> None:
    """A real loop through the real probe: every 4th iteration sleeps 100 ms, the others 1 ms."""
    from explorer.compile.runtime import run_step

    def step(iteration: int) -> None:
        time.sleep(0.1 if iteration % 4 == 3 else 0.001)

    result = run_step(step, 16, label="sleepy")
    sleeps = [it for it in result.iterations if it.iteration % 4 == 3]
    assert all(it.waited_ms is not None and it.waited_ms < it.ms for it in result.iterations)
    assert all(it.cpu_ms < it.ms / 2 for it in sleeps), "a sleep is wall time, not CPU time"
    d = result.diagnosis
    assert (d.cause, d.period, d.confidence, d.cycles) == ("unrelated", 4, "tentative", 3), (
        d.sentence
    )
    assert "iteration % 4 == 3" in d.sentence
    assert "period 4, seen over 3 cycles; run more iterations to confirm" in d.sentence
    doc = result.to_json()
    assert (doc["period"], doc["confidence"], doc["cycles"], doc["kind"]) == (
        4,
        "tentative",
        3,
        "compile",
    )


def test_a_long_period_four_is_not_reported_as_half_of_it() -> None:
    """Every other iteration holds half the slow ones: ranks alone would call that period 2."""
    rng = random.Random(1)
    idx = list(range(2, 402))
    times = [(100.0 if i % 4 == 3 else 1.0) * (1 + rng.gauss(0, 0.1)) for i in idx]
    found = find_time_period(idx, times)
    assert found is not None and (found.period, found.phase, found.confirmed) == (4, 3, True)


def _probed(walls: list[float], cpus: list[float], waits: list[float]):
    """A diagnosed probe result from per-iteration clocks: one variant, compiled at iteration 0."""
    from explorer.compile.analysis.diagnosis import diagnose
    from explorer.compile.traces.records import Iteration, ProbeResult

    its = [
        Iteration(i, w, i == 0, ("0/0",), False, c, q)
        for i, (w, c, q) in enumerate(zip(walls, cpus, waits))
    ]
    result = ProbeResult(iterations=its)
    result.diagnosis = diagnose(result)
    return result


def test_a_neighbour_taking_the_core_every_third_iteration_is_not_a_period() -> None:
    """Wall time repeats every 3 iterations only because another process held the core then:
    the iteration's own time is flat, so no period is found (held out: the period is not this job's)."""
    rng = random.Random(5)
    n = 45
    cpus = [5.0 * (1 + rng.gauss(0, 0.02)) for _ in range(n)]
    waits = [(40.0 if i % 3 == 2 else 0.2) * (1 + rng.gauss(0, 0.05)) for i in range(n)]
    walls = [c + w for c, w in zip(cpus, waits)]
    idx = list(range(2, n))
    assert find_time_period(idx, walls[2:]).period == 3  # the trap: wall time alone has one
    d = _probed(walls, cpus, waits).diagnosis
    assert d.cause == "steady" and d.period is None, d.sentence
    assert "other processes held the cores for" in d.sentence


def test_a_busy_machine_does_not_drown_a_real_period() -> None:
    """Every 3rd iteration does 5x the work, while other processes hold the core for a random
    0-300 ms of each: wall time shows no period, the iterations' own time shows it confirmed."""
    rng = random.Random(11)
    n = 45
    cpus = [(25.0 if i % 3 == 2 else 5.0) * (1 + rng.gauss(0, 0.05)) for i in range(n)]
    waits = [rng.uniform(0, 300) for _ in range(n)]
    walls = [c + w for c, w in zip(cpus, waits)]
    assert find_time_period(list(range(2, n)), walls[2:]) is None  # drowned in wall time
    d = _probed(walls, cpus, waits).diagnosis
    assert (d.cause, d.period, d.confidence) == ("unrelated", 3, "confirmed"), d.sentence
    assert "iteration % 3 == 2" in d.sentence and "other processes held the cores" in d.sentence


def test_without_the_wait_the_wall_time_is_read() -> None:
    """A profiler trace has no waits: the period is read from wall time as before."""
    n = 30
    walls = [25.0 if i % 3 == 2 else 5.0 for i in range(n)]
    d = _probed(walls, [None] * n, [None] * n).diagnosis
    assert (d.cause, d.period) == ("unrelated", 3), d.sentence
    assert "other processes" not in d.sentence


def test_that_nothing_compiled_ran_is_said_whatever_period_is_found() -> None:
    """A fact about the run is not hidden by a timing verdict: an eager run with a slow every
    3rd iteration is diagnosed as periodic work and still says the model ran eagerly."""
    from explorer.compile.analysis.diagnosis import diagnose
    from explorer.compile.traces.records import Iteration, ProbeResult

    its = [
        Iteration(i, 25.0 if i % 3 == 2 else 5.0, i == 0, (), False, None, 0.0) for i in range(30)
    ]
    result = ProbeResult(iterations=its, variant_source="tracking backend")
    d = diagnose(result)
    assert d.cause == "unrelated" and "ran eagerly" in d.sentence, d.sentence
    result.iterations = [Iteration(0, 5.0, True, ("0/0",), False, None, 0.0)] + its[1:]
    assert "ran eagerly" not in diagnose(result).sentence  # one iteration ran a compiled graph


def test_a_busy_run_on_several_threads_says_its_own_time_is_not_clean() -> None:
    rng = random.Random(11)
    n = 30
    cpus = [5.0 * (1 + rng.gauss(0, 0.02)) for _ in range(n)]
    waits = [5.0] * n
    walls = [c + w for c, w in zip(cpus, waits)]
    many = _probed(walls, cpus, waits)
    many.threads = 4
    from explorer.compile.analysis.diagnosis import diagnose

    assert "on 4 intra-op threads" in diagnose(many).sentence
    many.threads = 1
    sentence = diagnose(many).sentence
    assert "other processes held the cores" in sentence and "intra-op" not in sentence


@settings(deadline=None, max_examples=200)
@given(
    slow=st.lists(
        st.sampled_from([0.5, 1.0, 1.5, 2.0, float("nan")]) | st.floats(0, 3),
        min_size=1,
        max_size=20,
    ),
    rest=st.lists(
        st.sampled_from([0.5, 1.0, 1.5, 2.0, float("nan")]) | st.floats(0, 3),
        min_size=1,
        max_size=40,
    ),
)
def test_the_rank_statistic_counts_every_pair_as_comparing_it_would(slow, rest) -> None:
    """The bisection count is the Mann-Whitney U of every pair (ties half, NaN never)."""
    above = sum((s > r) + 0.5 * (s == r) for s in slow for r in rest)
    n1, n2 = len(slow), len(rest)
    assert _rank_z(slow, rest) == (above - n1 * n2 / 2) / ((n1 * n2 * (n1 + n2 + 1) / 12) ** 0.5)
