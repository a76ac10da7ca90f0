"""Shared fixtures for the explorer's views, widgets, notebooks and browser tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from explorer.analysis import build, check

REPO = Path(__file__).resolve().parents[2]
KERNEL = "explorer"


@pytest.fixture(scope="session")
def seed_bug():
    """The seed's broken schedule: DeepSpeed's buffer count without the +1, old P2P order."""
    return check(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy"))


@pytest.fixture(scope="session")
def seed_fixed():
    """Today's DeepSpeed: fewer buffers and the reordered exchanges."""
    return check(build("deepspeed-train", 4, 8, buffers="fixed", order="fixed"))


@pytest.fixture(scope="session")
def explorer_kernel() -> str:
    """The ``explorer`` kernel spec the notebooks name, installed into this environment if missing.

    Same command as ``make kernels``, so a test run on a fresh venv needs no manual step.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if KERNEL not in KernelSpecManager().find_kernel_specs():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "jupyter",
                "kernelspec",
                "install",
                "--sys-prefix",
                "--replace",
                str(REPO / "kernels" / KERNEL),
            ],
            check=True,
            capture_output=True,
        )
    return KERNEL
