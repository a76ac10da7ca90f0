"""The stall rule of a followed job (explorer.pipeline.traces.stall), on an injected clock."""

from __future__ import annotations

import pytest

from explorer.errors import InputError
from explorer.pipeline.traces.stall import FACTOR, FLOOR_S, StallWatch, stall_words


def _steady(watch: StallWatch, gap: float, lines: int, t: float = 0.0) -> float:
    """``lines`` lines ``gap`` seconds apart from ``t``; returns the time of the last."""
    for i in range(lines):
        t = t + (gap if i else 0.0)
        watch.progressed(t)
    return t


def test_nothing_written_yet_is_never_stalled():
    assert StallWatch().stalled_for(10_000.0) is None


def test_a_fast_job_is_stalled_after_the_floor_and_says_for_how_long():
    watch = StallWatch()
    t = _steady(watch, 0.01, 50)
    assert watch.threshold_s() == FLOOR_S
    assert watch.stalled_for(t + FLOOR_S) is None  # exactly the floor: not yet
    assert watch.stalled_for(t + 42.5) == pytest.approx(42.5)
    assert stall_words(42.5) == "stalled for 42 s"


def test_the_default_is_a_multiple_of_the_longest_silence_seen():
    watch = StallWatch()
    t = _steady(watch, 0.5, 10)
    watch.progressed(t + 6.0)  # an evaluation between iterations: 6 s without a line
    t = _steady(watch, 0.5, 10, t + 6.0)
    assert watch.threshold_s() == FACTOR * 6.0
    assert watch.stalled_for(t + 29.0) is None
    assert watch.stalled_for(t + 31.0) == pytest.approx(31.0)


def test_a_job_that_slows_down_but_moves_is_never_called_stalled():
    """Each silence twice the one before (a job slowing down a lot): at no moment is it stalled."""
    watch = StallWatch()
    t, gap = 0.0, 0.2
    watch.progressed(t)
    for _ in range(20):
        for k in range(1, 11):  # look at ten moments inside each silence
            assert watch.stalled_for(t + gap * k / 10) is None
        t += gap
        watch.progressed(t)
        gap *= 2.0


def test_progress_after_a_stall_makes_it_running_again():
    watch = StallWatch()
    t = _steady(watch, 1.0, 5)
    assert watch.stalled_for(t + 20.0) is not None
    watch.progressed(t + 20.0)
    assert watch.stalled_for(t + 21.0) is None
    assert watch.threshold_s() == FACTOR * 20.0  # that silence is now part of its rhythm


def test_the_users_stall_time_wins_over_the_rule():
    watch = StallWatch(stall_after_s=2.0)
    t = _steady(watch, 1.0, 3)
    watch.progressed(t + 30.0)
    assert watch.stalled_for(t + 31.5) is None
    assert watch.stalled_for(t + 32.5) == pytest.approx(2.5)


def test_each_stall_is_told_apart_by_the_progress_before_it():
    watch = StallWatch()
    _steady(watch, 1.0, 4)
    assert watch.progress_count == 4


@pytest.mark.parametrize("bad", [0, -1.0])
def test_a_stall_time_that_is_not_positive_is_refused_in_one_line(bad):
    with pytest.raises(InputError, match="stall_after_s must be a positive number"):
        StallWatch(stall_after_s=bad)
