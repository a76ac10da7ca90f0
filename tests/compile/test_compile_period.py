"""Period detection and the four-cause diagnosis on constructed records (pure: no torch)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.compile.analysis.diagnosis import diagnose, steady_iterations
from explorer.compile.analysis.period import label_period, time_period
from explorer.compile.traces.records import CompileEvent, Iteration, ProbeResult


@given(k=st.integers(2, 6), cycles=st.integers(2, 6), offset=st.integers(0, 5))
def test_label_period_finds_the_smallest_exact_repeat(k: int, cycles: int, offset: int) -> None:
    labels = [f"v{(i + offset) % k}" for i in range(k * cycles)]
    assert label_period(labels) == k


def test_label_period_none_for_constant_or_aperiodic() -> None:
    assert label_period(["a"] * 10) is None
    assert label_period(["a", "b", "c", "d", "e", "f"]) is None


@settings(deadline=None, max_examples=60)
@given(k=st.integers(2, 5), seed=st.integers(0, 10_000), dip=st.floats(0.03, 0.5))
def test_time_period_finds_a_slow_phase_in_noise(k: int, seed: int, dip: float) -> None:
    rng = random.Random(seed)
    idx = list(range(8 * k))
    times = [100.0 * (1 + dip * (i % k == k - 1)) * (1 + rng.uniform(-0.003, 0.003)) for i in idx]
    assert time_period(idx, times) == k


def test_a_half_slow_phase_of_a_shorter_period_is_not_the_period() -> None:
    """Every 4th iteration 50 % slower, 0.3 % noise: phase 1 of k = 2 is half slow, and this
    draw's normal half sits at the top of the noise, so k = 2 passed the rank test before k = 4
    was tried (about 1 in 1,000 such series). Split at 4, half of that phase is normal."""
    rng = random.Random(1578)
    idx = list(range(32))
    times = [100.0 * (1 + 0.5 * (i % 4 == 3)) * (1 + rng.uniform(-0.003, 0.003)) for i in idx]
    assert time_period(idx, times) == 4


def test_time_period_ignores_flat_noise_and_lone_outliers() -> None:
    rng = random.Random(1)
    idx = list(range(30))
    times = [1.0 + rng.uniform(-0.01, 0.01) for _ in idx]
    times[8] = times[20] = 30.0  # two stray slow iterations in phase 2 of 3 and 0 of 4
    assert time_period(idx, times) is None


def test_seed_throughput_is_period_three() -> None:
    tflops = [196, 196, 192] * 6  # the seed thread, as time per iteration
    assert time_period(list(range(18)), [1000 / t for t in tflops]) == 3


def _its(ms, variants, compiled=(), fallback=()):
    return [
        Iteration(i, m, i in compiled, (v,) if v else (), i in fallback)
        for i, (m, v) in enumerate(zip(ms, variants))
    ]


def test_diagnose_cycling_names_the_variants() -> None:
    variants = [f"0/{i % 3}" for i in range(18)]
    ms = [500.0, 400.0, 400.0] + [1.0 if i % 3 != 2 else 2.0 for i in range(3, 18)]
    compiles = [
        CompileEvent(
            f"0/{i}", i, "forward", None if i == 0 else f"0/{i - 1}: L['s'].mode == {i - 1}"
        )
        for i in range(3)
    ]
    d = diagnose(ProbeResult(_its(ms, variants, compiled={0, 1, 2}), compiles=compiles))
    assert (d.cause, d.period) == ("cycling", 3)
    assert "0/0 -> 0/1 -> 0/2" in d.sentence and "0/2 is the slowest" in d.sentence


def test_diagnose_recompiles_every_k() -> None:
    points = [0, 4, 8, 12]
    ms = [300.0 if i in points else 1.0 for i in range(15)]
    variants = [f"0/{i // 4}" for i in range(15)]
    compiles = [
        CompileEvent(
            f"0/{n}", p, "forward", None if n == 0 else "0/0: tensor 'x' size mismatch at index 1"
        )
        for n, p in enumerate(points)
    ]
    d = diagnose(ProbeResult(_its(ms, variants, compiled=set(points)), compiles=compiles))
    assert (d.cause, d.period) == ("recompiles", 4)
    assert "dynamic" in d.sentence


def test_diagnose_eager_fallback_after_limit() -> None:
    variants = ["0/0", "0/1", "eager"] * 6
    fell = {i for i in range(18) if i % 3 == 2}
    compiles = [
        CompileEvent("0/0", 0, "forward"),
        CompileEvent("0/1", 1, "forward", "0/0: L['s'].mode == 0"),
        CompileEvent("0/2", 2, None, "0/1: L['s'].mode == 1", "RecompileLimitExceeded"),
    ]
    d = diagnose(
        ProbeResult(
            _its([1.0] * 18, variants, compiled={0, 1}, fallback=fell),
            compiles=compiles,
            recompile_limit=2,
        )
    )
    assert (d.cause, d.period) == ("eager-fallback", 3)
    assert "'forward' hit config.recompile_limit (2) at iteration 2" in d.sentence


def test_a_limit_hit_with_unrecorded_fallback_is_never_called_cycling() -> None:
    """A user's step on a stock backend hits the limit: the probe cannot see which iterations
    fell back (``fallback`` None), and each frame's variant is the last that ran. Its labels
    cycled, and the probe said "cycling, not a recompile" where ``read`` of the same run's trace
    said "eager-fallback"."""
    variants = [f"0/{min(i % 6, 3)}" for i in range(24)]  # modes 4 and 5 show the stale 0/3
    compiles = [CompileEvent(f"0/{k}", k, "forward") for k in range(4)] + [
        CompileEvent("0/4", 4, None, "0/3: self.mode == 3", "RecompileLimitExceeded")
    ]
    its = [
        Iteration(i, 1.0, i < 4, (v,), None if i >= 4 else False) for i, v in enumerate(variants)
    ]
    d = diagnose(ProbeResult(its, compiles=compiles, recompile_limit=4))
    assert (d.cause, d.period) == ("eager-fallback", None)
    assert "hit config.recompile_limit (4) at iteration 4" in d.sentence
    assert "not recorded" in d.sentence and "cycl" not in d.sentence.lower()
    # where fallback was recorded as none at all, the limit alone is no eager-fallback verdict
    its = [Iteration(i, 1.0, i < 4, (v,), False) for i, v in enumerate(variants)]
    assert (
        diagnose(ProbeResult(its, compiles=compiles, recompile_limit=4)).cause != "eager-fallback"
    )


def test_cycling_is_seen_through_a_profilers_repeating_windows() -> None:
    """``schedule(wait=1, warmup=1, active=3, repeat=0)`` records iterations 2-4, 7-9, 12-14...:
    no contiguous run holds two cycles of 3, and the slow variant's phase read as "periodic work
    unrelated to compilation" (look for an optimizer step) while the variant changed with it."""
    recorded = [i for i in range(30) if i % 5 >= 2]
    its = [
        Iteration(
            i, 300.0 if i < 3 else (14.0 if i % 3 == 2 else 2.0), i < 3, (f"0/{i % 3}",), False
        )
        for i in recorded
    ]
    compiles = [CompileEvent(f"0/{k}", k, "forward") for k in range(3)]
    d = diagnose(ProbeResult(its, compiles=compiles))
    assert (d.cause, d.period) == ("cycling", 3), d.sentence
    assert "0/2 is the slowest" in d.sentence
    # the same windows with one variant throughout: the slow phase is unrelated work
    its = [Iteration(it.iteration, it.ms, it.compiled, ("0/0",), False) for it in its]
    assert diagnose(ProbeResult(its, compiles=compiles[:1])).cause != "cycling"


def test_diagnose_unrelated_periodic_work() -> None:
    ms = [200.0] + [5.0 if i % 3 == 2 else 1.0 for i in range(1, 24)]
    d = diagnose(
        ProbeResult(
            _its(ms, ["0/0"] * 24, compiled={0}), compiles=[CompileEvent("0/0", 0, "forward")]
        )
    )
    assert (d.cause, d.period) == ("unrelated", 3)
    assert "iteration % 3 == 2" in d.sentence


def test_diagnose_steady_when_nothing_repeats() -> None:
    d = diagnose(
        ProbeResult(
            _its([200.0] + [1.0] * 11, ["0/0"] * 12, compiled={0}),
            compiles=[CompileEvent("0/0", 0, "f")],
        )
    )
    assert d.cause == "steady" and d.period is None


def test_steady_iterations_drop_compiles_and_first_runs() -> None:
    its = _its([9.0, 9.0, 5.0, 1.0, 1.0, 1.0], ["a", "b", "a", "b", "a", "b"], compiled={0, 1})
    assert [it.iteration for it in steady_iterations(its)] == [4, 5]
