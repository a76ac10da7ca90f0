"""Source lines are recorded while graphs are new and switched off once the run settles.

Toggling torch_xla's IR debug must not change what compiles (graph hashes): the steady loop
settles to the same graphs with lines on every step and with the switch.
"""

from __future__ import annotations

import pytest

from explorer.errors import InputError
from explorer.xla.runtime import run_scenario
from explorer.xla.runtime.config import RunConfig

pytestmark = pytest.mark.slow


def test_lines_switch_off_after_the_run_settles_without_new_compiles(steady_run) -> None:
    always = run_scenario("steady", layers=1, steps=5, lines_settle=0)
    switched = steady_run  # default: lines_settle=2
    assert always.ok and switched.ok
    assert [s.source_lines for s in always.steps] == [True] * 5
    # steps 0 and 1 compile; steps 2 and 3 are quiet, so lines are off from step 4 on
    assert [s.source_lines for s in switched.steps] == [True, True, True, True, False]
    assert [s.compiled for s in switched.steps] == [s.compiled for s in always.steps]
    assert len(switched.graphs) == len(always.graphs)
    assert sum(s.uncached for s in switched.steps) == sum(s.uncached for s in always.steps)


def test_lines_stay_on_while_graphs_keep_changing(logging_run) -> None:
    new_every_step = [s for s in logging_run.steps if s.new_graphs]
    assert len(new_every_step) >= 3
    assert all(s.source_lines for s in new_every_step)
    assert any(".py:" in s.cause for s in new_every_step[1:])


def test_negative_settle_is_rejected() -> None:
    with pytest.raises(InputError, match="lines_settle"):
        RunConfig(scenario="steady", lines_settle=-1).resolved()
