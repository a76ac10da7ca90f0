"""Fixtures of the browser tier: kernels, one Chromium per session, a screenshot folder.

The harness lives next to this file (``lab_harness.py``); pytest's default import mode puts
this folder on ``sys.path``, and ``benchmarks/bench_browser.py`` adds it itself.
"""

from __future__ import annotations

import os
from pathlib import Path

import lab_harness
import pytest


@pytest.fixture(scope="session")
def lab_kernels() -> None:
    """The ``explorer`` and ``explorer-xla`` kernel specs, installed into this venv if missing (as ``make kernels``)."""
    lab_harness.ensure_kernels(("explorer", "explorer-xla"))


@pytest.fixture(scope="session")
def chromium():
    """Debian's Chromium under Playwright, headless, for the whole session."""
    pytest.importorskip("playwright.sync_api")
    with lab_harness.Browser() as browser:
        yield browser


@pytest.fixture(scope="session")
def shots(tmp_path_factory) -> Path:
    """Where screenshots go: ``$EXPLORER_SHOTS`` when set, else a pytest temporary folder."""
    folder = (
        Path(os.environ["EXPLORER_SHOTS"])
        if os.environ.get("EXPLORER_SHOTS")
        else tmp_path_factory.mktemp("shots")
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder
