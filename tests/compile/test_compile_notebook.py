"""``notebooks/05_compile_recompiles.ipynb`` runs top to bottom in a real kernel."""

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

NOTEBOOK = NOTEBOOKS / "05_compile_recompiles.ipynb"


def test_notebook_is_thin_and_committed_without_outputs() -> None:
    assert_committed_clean_and_thin(
        NOTEBOOK, "explorer", max_lines=4, cite="https://github.com/deepspeedai/DeepSpeed/pull/4878"
    )


@pytest.mark.slow
def test_notebook_executes_and_diagnoses_period_three(tmp_path) -> None:
    nb = execute(NOTEBOOK, timeout=300, cwd=tmp_path)
    text = texts(nb)
    assert "Cycling among 3 cached variants every 3 iterations" in text
    assert "True recompiles every 3 iterations" in text and "Eager fallback" in text
    assert "guards that failed before 0/3" in text and "size mismatch" in text, (
        "the trace folder section ran"
    )
    kinds = set().union(*mimes(nb))
    assert PLOTLY in kinds and WIDGET in kinds
    assert stderr(nb) == [], f"a teaching notebook prints no warnings: {stderr(nb)}"
