"""Notebook 03 runs top to bottom on the explorer kernel and shows what it claims."""

from __future__ import annotations

import pytest
from notebook_claims import claims_03
from notebook_run import NOTEBOOKS, assert_committed_clean_and_thin, execute

PATH = NOTEBOOKS / "03_run_pipeline.ipynb"


def test_committed_clean_and_thin():
    assert_committed_clean_and_thin(PATH, "explorer")


@pytest.mark.slow
@pytest.mark.notebook_claims("03", "nbclient")
def test_notebook_executes_and_shows_the_claims():
    """03's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_03(execute(PATH, timeout=240))
