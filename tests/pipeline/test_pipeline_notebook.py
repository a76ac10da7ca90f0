"""Notebook 03 runs top to bottom on the explorer kernel and shows what it claims."""

from __future__ import annotations

import pytest
from notebook_run import (
    NOTEBOOKS,
    PLOTLY,
    WIDGET,
    assert_committed_clean_and_thin,
    execute,
    mimes,
    printed,
)

PATH = NOTEBOOKS / "03_run_pipeline.ipynb"


def test_committed_clean_and_thin():
    assert_committed_clean_and_thin(PATH, "explorer")


@pytest.mark.slow
def test_notebook_executes_and_shows_the_claims():
    nb = execute(PATH, timeout=240)
    text = printed(nb)
    assert text.count("bitwise_equal_to_reference=True") == 3
    assert "bitwise identical to each other: True" in text
    # The failure in sentences (Failure.describe), never the raw record.
    assert "measured:  rank 2, stage 2, step 6, SendGrad(buffer_id=0): " in text
    assert "'instruction':" not in text
    assert "stage 2 step 6: SendGrad(buffer_id=0)" in text  # the analysis said the same beforehand
    # PyTorch's engine agrees
    assert "losses and gradients bitwise equal between engines: True" in text
    kinds = mimes(nb)
    assert any(PLOTLY in m for m in kinds) and any(WIDGET in m for m in kinds)
