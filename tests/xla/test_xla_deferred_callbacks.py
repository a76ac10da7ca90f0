"""The seed's mechanism without collectives: callbacks queued across steps change the graph.

Real torch_xla steps (``deferred-callbacks`` preset): the queue of per-gradient callbacks runs
once more than a step's worth waits, so the live tensors at the sync alternate. Four graphs
where two were expected, then the last two alternate from the cache, each pinned to a cause.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_queued_callbacks_give_four_graphs_then_alternate():
    from explorer.xla.runtime import run_scenario

    run = run_scenario("deferred-callbacks", layers=1, steps=6)
    assert run.ok, run.failure
    assert [s.new_graph for s in run.steps] == [True, True, True, True, False, False]
    assert run.steps[4].graph_hash == run.steps[2].graph_hash
    assert run.steps[5].graph_hash == run.steps[3].graph_hash
    assert run.steps[2].num_parameters != run.steps[3].num_parameters
    # step 3 is step 1's program plus the running total the first flush did not have yet
    assert "against graph " + run.steps[1].graph_hash[:8] in run.steps[3].cause
    assert "steps.py" in run.steps[3].cause and "aten__add" in run.steps[3].cause
