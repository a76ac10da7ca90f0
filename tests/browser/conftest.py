"""Fixtures of the browser tier: kernels, one Chromium per session, a screenshot folder.

The harness lives next to this file (``lab_harness.py``); pytest's default import mode puts
this folder on ``sys.path``, and ``benchmarks/bench_browser.py`` adds it itself.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import lab_harness
import pytest
from notebook_claims import MARK, superseded_runs


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


def lab_can_run() -> bool:
    """Whether this machine can run the browser tier: Playwright and Debian's Chromium there."""
    return (
        importlib.util.find_spec("playwright") is not None and shutil.which("chromium") is not None
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Execute each teaching notebook once per run: leave out the nbclient test of a notebook
    whose claims the lab's Run All checks in this same run.

    Executing a notebook costs one to two minutes on a 2-core machine, and both tiers assert the
    same claims (``tests/notebook_claims.py``): the browser test on the file the page saved, the
    nbclient test on its own execution. The tests are linked by their ``notebook_claims(key,
    by)`` marks. Last (``trylast``), so ``-m``/``-k`` have deselected first: under ``-m "not
    browser"`` (or where Chromium or Playwright is missing, when the browser tests cannot check
    anything) nothing is left out and the nbclient tests execute the notebooks as before. This
    hook is here, beside the browser tests, because only a run that collects them can need it.
    """
    marked = [
        (item, *item.get_closest_marker(MARK).args)
        for item in items
        if item.get_closest_marker(MARK) is not None
    ]
    drop = superseded_runs(marked, lab_can_run())
    if drop:
        dropped = set(drop)
        items[:] = [item for item in items if item not in dropped]
        config.hook.pytest_deselected(items=drop)
