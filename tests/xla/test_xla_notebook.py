"""``notebooks/04_xla_recompilation.ipynb`` runs top to bottom on the explorer-xla kernel."""

from __future__ import annotations

import pytest
from notebook_claims import claims_04
from notebook_run import NOTEBOOKS, assert_committed_clean_and_thin, execute

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


@pytest.mark.notebook_claims("04", "nbclient")
def test_notebook_executes_and_explains_the_recompiles(tmp_path) -> None:
    """04's claims (``notebook_claims``) on nbclient's own execution: left out of a run that checks
    them on the browser tier's Run All instead (``tests/browser/conftest.py``)."""
    claims_04(execute(NOTEBOOK, timeout=400, cwd=tmp_path))
