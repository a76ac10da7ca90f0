"""The XLA and compile explorers say when their controls no longer describe the result below.

Run runs what the controls show. Once a control moves, the run or probe on screen is another
one, and the status line says so (and stops saying so when the controls come back to it); an
error on Run says that what is below is still the earlier result. Driven as the page drives
them: a control's value set, a button clicked.
"""

from __future__ import annotations

import re

from read_back_run import read_back_run

from explorer.compile.app import CompileExplorer
from explorer.compile.traces.records import ProbeResult
from explorer.xla.app import XlaExplorer
from explorer.xla.runtime.config import RunConfig

CHANGED = "the controls have changed since"


def words(value: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", value)).strip()


def test_xla_a_run_without_the_recompiles_hlo_opens_without_a_diff():
    # default_pair names the last recompile, whose HLO this reading lacks: no diff offered
    app = XlaExplorer(run=read_back_run())
    assert app.errors == [] and app.graph_a.options == () and app.graph_a.value is None


def test_xla_opened_run_note_follows_the_controls():
    app = XlaExplorer(run=read_back_run())
    app.describe_opened(RunConfig(scenario="steady", steps=6, layers=2, fsdp="v1"), 6)
    app._run_words = "<p>the run</p>"
    app._say_controls()
    assert "Run runs it again" in words(app.status.value)
    app.layers.value = 4
    said = words(app.status.value)
    assert CHANGED in said and "Run runs it again" not in said
    app.layers.value = 2  # back to the run's settings
    said = words(app.status.value)
    assert CHANGED not in said and "Run runs it again" in said
    app.scenario.value = "logging"  # the scenario's own handler says it too
    assert CHANGED in words(app.status.value)


def test_xla_an_error_on_run_says_the_run_below_is_the_earlier_one():
    app = XlaExplorer("steady", run=read_back_run(), batch=6)
    app.fsdp.value = "v2"  # 6 is not divisible by the 4 virtual devices: Run cannot start
    app.run_button.click()
    said = words(app.status.value)
    assert "divisible" in said and "Below: still the earlier run, read /tmp/x" in said


def test_compile_probe_note_follows_the_controls():
    result = ProbeResult(iterations=[], label="limit", backend="aot_eager")
    app = CompileExplorer("limit", backend="aot_eager", result=result)
    assert CHANGED not in words(app.status.value)
    app.backend.value = "eager"
    assert CHANGED in words(app.status.value) and "the probe of limit" in words(app.status.value)
    app.scenario.value = "cycling"  # its handler also sets the iterations: one note, not two
    assert words(app.status.value).count(CHANGED) == 1


def test_compile_a_read_job_keeps_its_note_until_a_scenario_is_chosen():
    result = ProbeResult(iterations=[], label="job", backend="inductor")
    app = CompileExplorer(result=result)
    app.describe_read()
    assert app.run_button.disabled and CHANGED not in words(app.status.value)
    app.scenario.value = "cycling"
    assert not app.run_button.disabled and CHANGED in words(app.status.value)
