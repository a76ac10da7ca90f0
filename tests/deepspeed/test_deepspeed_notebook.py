"""Notebook 06 runs top to bottom on the explorer kernel and tells the seed's story on DeepSpeed's engine."""

from __future__ import annotations

import pytest
from notebook_claims import claims_06
from notebook_run import NOTEBOOKS, assert_committed_clean_and_thin, execute

PATH = NOTEBOOKS / "06_deepspeed_engine.ipynb"


def test_committed_clean_and_thin():
    assert_committed_clean_and_thin(PATH, "explorer")


@pytest.mark.slow
@pytest.mark.notebook_claims("06", "nbclient")
def test_notebook_executes_and_shows_the_claims():
    """06's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_06(execute(PATH, timeout=300))
