"""Notebook 06 runs top to bottom on the explorer kernel and tells the seed's story on DeepSpeed's engine."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parents[2]
PATH = REPO / "notebooks" / "06_deepspeed_engine.ipynb"


def test_committed_clean_and_thin():
    nb = nbformat.read(PATH, as_version=4)
    assert nb.metadata.kernelspec.name == "explorer"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
            assert not any(
                line.lstrip().startswith(("def ", "class ")) for line in cell.source.splitlines()
            )
            assert len(cell.source.splitlines()) <= 8


@pytest.mark.slow
def test_notebook_executes_and_shows_the_claims():
    from jupyter_client.kernelspec import KernelSpecManager

    if "explorer" not in KernelSpecManager().find_kernel_specs():
        subprocess.run(
            [sys.executable, "-m", "jupyter", "kernelspec", "install", "--sys-prefix",
             "--replace", str(REPO / "kernels" / "explorer")],
            check=True,
            capture_output=True,
        )  # fmt: skip
    nb = nbformat.read(PATH, as_version=4)
    NotebookClient(
        nb,
        kernel_name="explorer",
        timeout=300,
        store_widget_state=False,
        resources={"metadata": {"path": str(PATH.parent)}},
    ).execute()
    text = "\n".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert text.count("bitwise_equal_to_reference=True") == 2
    assert "losses bitwise identical to each other: True" in text
    assert "predicted: stage 2 step 6: SendGrad(buffer_id=0)" in text
    assert "DeepSpeed: rank 2, stage 2, step 6, SendGrad(buffer_id=0): AssertionError" in text
    assert "first failure: AssertionError" in text and "stage 2 step 6" in text
    assert "first failure: rank 2, stage 2, step 6" in text  # explorer read, from a terminal
    mimes = [
        set(o.get("data", {}))
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "data" in o
    ]
    assert any("application/vnd.plotly.v1+json" in m for m in mimes)
    assert any("application/vnd.jupyter.widget-view+json" in m for m in mimes)
