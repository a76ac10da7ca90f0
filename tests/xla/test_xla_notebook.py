"""``notebooks/04_xla_recompilation.ipynb`` runs top to bottom on the explorer-xla kernel."""

from __future__ import annotations

import pytest
from notebook_run import (
    NOTEBOOKS,
    PLOTLY,
    WIDGET,
    assert_committed_clean_and_thin,
    execute,
    mimes,
    stderr,
    texts,
)

NOTEBOOK = NOTEBOOKS / "04_xla_recompilation.ipynb"

pytestmark = pytest.mark.slow


def test_notebook_is_thin_and_committed_without_outputs() -> None:
    nb = assert_committed_clean_and_thin(
        NOTEBOOK, "explorer-xla", max_lines=4, cite="https://github.com/pytorch/xla/issues/4160"
    )
    assert nb.metadata["kernelspec"] == {
        "display_name": "Python (explorer, XLA CPU)",
        "language": "python",
        "name": "explorer-xla",
    }


def test_notebook_executes_and_explains_the_recompiles(tmp_path) -> None:
    nb = execute(NOTEBOOK, timeout=400, cwd=tmp_path)
    text = texts(nb)
    assert "pin_layout_in_collective_ops=False" in text
    assert "new graph: no, because graph" in text
    assert "instruction(s) added" in text and "parameter count changed" in text
    kinds = set().union(*mimes(nb))
    assert PLOTLY in kinds and WIDGET in kinds
    assert stderr(nb) == [], "a teaching notebook prints no warnings"
    assert "model ready on" in text and "step 3: " in text, "cells that run steps print progress"
    assert "same verdicts as the run: True" in text, "the folder reads back with the run's verdicts"
    assert (
        "\n3 new graph: yes" in text and "\n4 new graph: no" in text and "\n5 new graph: no" in text
    ), "deferred callbacks: four graphs where two were expected, then cache hits"
    timeline = next(
        o.data["application/vnd.plotly.v1+json"]
        for c in nb.cells
        if "step_timeline(" in c.source
        for o in c.outputs
        if "application/vnd.plotly.v1+json" in o.get("data", {})
    )
    title = timeline["layout"]["title"]["text"]
    said = next(
        c.source for c in nb.cells if c.cell_type == "markdown" and "as expected" in c.source
    )
    assert "**2 graphs, as expected**" in said and ": steps 0, 1 compiled 2 graphs" in title, title
