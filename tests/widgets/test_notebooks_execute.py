"""Notebooks 01 and 02 run top to bottom on the ``explorer`` kernel, and say what they claim.

Executed with nbclient in a real kernel (the kernel spec the notebooks name). The notebooks are
committed without outputs and stay thin (see :mod:`notebook_run`).
"""

from __future__ import annotations

import json

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


def _titles(nb, containing: str = "") -> list[str]:
    return [
        json.dumps(o["data"][PLOTLY]["layout"].get("title", {}))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if PLOTLY in o.get("data", {}) and containing in json.dumps(o["data"][PLOTLY]["layout"])
    ]


@pytest.mark.slow
def test_01_runs_and_ends_with_the_live_explorer():
    nb = execute(NOTEBOOKS / "01_pipeline_schedules.ipynb", timeout=180)
    kinds = mimes(nb)
    assert sum(PLOTLY in m for m in kinds) >= 6  # grid, timelines, comparisons as plain figures
    assert WIDGET in kinds[-1] and "text/html" in kinds[-1]  # the live app, static fallback
    assert any("bubble 27.3% of total time" in t for t in _titles(nb))  # GPipe: 3/11


@pytest.mark.slow
def test_02_tells_the_seed_story():
    nb = execute(NOTEBOOKS / "02_deepspeed_buffer_bug.ipynb", timeout=180)
    text = printed(nb)
    assert "stage 2 step 6: SendGrad(buffer_id=0) must send micro-batch 0's input gradient" in text
    # The fix, in the listing: the gradient leaves before the next activation arrives.
    assert (
        "[2, SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]" in text
    )
    # legacy and fixed, listed and summarised
    assert text.count("verdict: valid") == 4 and "INVALID" not in text
    lifetimes = _titles(nb, containing="Buffer lifetimes")
    assert (
        len(lifetimes) == 2
        and "2 allocated, 3 needed" in lifetimes[0]
        and "2 allocated, 2 needed" in lifetimes[1]
    )
    # Every size: the smallest failing case, today's schedule proved, and the fix found and proved.
    assert "smallest failing size: 3 stages x 3 micro-batches" in text
    assert (
        "no hazard, mismatch, deadlock or wrong gradient count at any of 1,984 sizes in 2-32:1-64"
        in text
    )
    assert "candidate 1: grads-first" in text and "defer-recv: fails at 2x2: deadlock" in text
    assert WIDGET in mimes(nb)[-1]
