"""Notebook 06 runs top to bottom on the explorer kernel and tells the seed's story on DeepSpeed's engine."""

from __future__ import annotations

import re

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

PATH = NOTEBOOKS / "06_deepspeed_engine.ipynb"


def test_committed_clean_and_thin():
    assert_committed_clean_and_thin(PATH, "explorer")


@pytest.mark.slow
def test_notebook_executes_and_shows_the_claims():
    nb = execute(PATH, timeout=300)
    text = printed(nb)
    assert text.count("bitwise_equal_to_reference=True") == 2
    assert "losses bitwise identical to each other: True" in text
    assert "predicted: stage 2 step 6: SendGrad(buffer_id=0)" in text
    assert "DeepSpeed: rank 2, stage 2, step 6, SendGrad(buffer_id=0): AssertionError" in text
    assert "first failure: AssertionError" in text and "stage 2 step 6" in text
    assert "first failure: rank 2, stage 2, step 6" in text  # explorer read, from a terminal
    # after job.wait(), no rank is listed as running: torchrun killed those that wrote no end
    listed = re.findall(r"rank \d \(stage \d\): (\w+)", text)
    assert len(listed) == 4 and set(listed) <= {"failed", "stopped"}, listed
    kinds = mimes(nb)
    assert any(PLOTLY in m for m in kinds) and any(WIDGET in m for m in kinds)
