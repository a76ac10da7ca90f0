"""``notebooks/05_compile_recompiles.ipynb`` runs top to bottom in a real kernel."""

from __future__ import annotations

import pytest
from notebook_claims import claims_05
from notebook_run import NOTEBOOKS, assert_committed_clean_and_thin, execute

NOTEBOOK = NOTEBOOKS / "05_compile_recompiles.ipynb"


def test_notebook_is_thin_and_committed_without_outputs() -> None:
    assert_committed_clean_and_thin(
        NOTEBOOK, "explorer", max_lines=4, cite="https://github.com/deepspeedai/DeepSpeed/pull/4878"
    )


@pytest.mark.slow
@pytest.mark.notebook_claims("05", "nbclient")
def test_notebook_executes_and_diagnoses_period_three(tmp_path) -> None:
    """05's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_05(execute(NOTEBOOK, timeout=300, cwd=tmp_path))
