"""compile-probe's records in a trace are input: what ``read`` takes from them is checked field by
field (pure: no torch). A record ``read`` cannot take leaves the run without a clean verdict
(``tests/compile/test_probe_trace_agree.py`` holds that end to end)."""

from __future__ import annotations

import math

import pytest

from explorer.compile.traces.records import Iteration, iteration_of_record, probe_record


def _record(**change: object) -> dict:
    doc = probe_record(Iteration(3, 12.5, True, ("0/1",), False, 11.0, 0.5, False), ["0/1"], 8, 2)
    return {**doc, **change}


def test_a_record_the_probe_wrote_reads_back_as_it_was():
    it, compiles = iteration_of_record(_record())  # type: ignore[misc]
    assert (it.iteration, it.ms, it.compiled, it.variants, compiles) == (
        3,
        12.5,
        True,
        ("0/1",),
        ("0/1",),
    )
    assert (it.cpu_ms, it.waited_ms) == (11.0, 0.5)


@pytest.mark.parametrize("ms", [-5, -0.001, math.nan, math.inf, 1e308, "12", True, None], ids=repr)
def test_an_iteration_time_no_run_can_have_is_not_a_record(ms):
    """``"ms": -5`` was taken and printed as ``-5.00``; NaN, 1e308 and text are refused too."""
    assert iteration_of_record(_record(ms=ms)) is None


def test_a_cpu_or_wait_time_below_zero_is_not_kept():
    it, _ = iteration_of_record(_record(cpu_ms=-1.0, waited_ms=-2.0))  # type: ignore[misc]
    assert (it.cpu_ms, it.waited_ms) == (None, None)
