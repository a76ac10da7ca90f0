"""Notebooks 01 and 02 run top to bottom on the ``explorer`` kernel, and say what they claim.

Executed with nbclient in a real kernel (the kernel spec the notebooks name). The notebooks are
committed without outputs and stay thin (see :mod:`notebook_run`).
"""

from __future__ import annotations

import pytest
from notebook_claims import claims_01, claims_02
from notebook_run import NOTEBOOKS, assert_committed_clean_and_thin, execute

PATHS = sorted(NOTEBOOKS.glob("0[12]*.ipynb"))


def test_both_notebooks_are_there():
    assert [p.name for p in PATHS] == [
        "01_pipeline_schedules.ipynb",
        "02_deepspeed_buffer_bug.ipynb",
    ]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.stem)
def test_committed_clean_and_thin(path):
    nb = assert_committed_clean_and_thin(path, "explorer")
    assert nb.metadata.kernelspec.display_name == "Python (explorer)"
    assert (
        sum(c.cell_type == "markdown" for c in nb.cells)
        >= sum(c.cell_type == "code" for c in nb.cells) // 2
    )


@pytest.mark.slow
@pytest.mark.notebook_claims("01", "nbclient")
def test_01_runs_and_ends_with_the_live_explorer():
    """01's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_01(execute(NOTEBOOKS / "01_pipeline_schedules.ipynb", timeout=180))


@pytest.mark.slow
@pytest.mark.notebook_claims("02", "nbclient")
def test_02_tells_the_seed_story():
    """02's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_02(execute(NOTEBOOKS / "02_deepspeed_buffer_bug.ipynb", timeout=180))
