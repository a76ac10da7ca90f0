"""Each teaching notebook is executed once per run: the rule that leaves out the second execution.

The rule (:func:`notebook_claims.superseded_runs`) is pure and checked here in the fast tier;
one slow case collects the real notebook tests in a child pytest, to prove the hook in
``tests/browser/conftest.py`` applies it after ``-m`` and only where the browser tier is selected.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from notebook_claims import CLAIMS, ONE_WORKER_MODULES, scheduling_unit, superseded_runs
from notebook_run import NOTEBOOKS

REPO = Path(__file__).resolve().parents[1]


def test_every_notebook_has_its_claims_and_only_those():
    assert sorted(CLAIMS) == sorted(p.name[:2] for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def test_the_nbclient_run_of_a_notebook_the_lab_checks_is_left_out():
    selected = [
        ("nbclient-03", "03", "nbclient"),
        ("nbclient-05", "05", "nbclient"),
        ("lab-03", "03", "lab"),
        ("lab-01", "01", "lab"),
    ]
    assert superseded_runs(selected, lab_can_run=True) == ["nbclient-03"]


def test_without_the_lab_check_every_nbclient_run_stays():
    """``-m "not browser"``, a run of one folder, or ``-k`` leaving the lab's check out."""
    selected = [("nbclient-03", "03", "nbclient"), ("nbclient-04", "04", "nbclient")]
    assert superseded_runs(selected, lab_can_run=True) == []
    assert superseded_runs([], lab_can_run=True) == []


def test_where_the_lab_cannot_run_nothing_is_left_out():
    """No Chromium or Playwright: the browser tests cannot check the claims, nbclient does."""
    selected = [("nbclient-03", "03", "nbclient"), ("lab-03", "03", "lab")]
    assert superseded_runs(selected, lab_can_run=False) == []


@pytest.mark.parametrize("key, by", [("07", "lab"), ("03", "browser"), ("3", "nbclient")])
def test_a_mark_that_names_no_notebook_or_no_runner_is_refused(key, by):
    with pytest.raises(ValueError, match="key one of"):
        superseded_runs([("t", key, by)], lab_can_run=True)


def _collected(*args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, [line for line in done.stdout.splitlines() if "::" in line]


@pytest.mark.slow
def test_the_hook_leaves_out_the_nbclient_run_only_when_the_lab_check_is_selected():
    files = [
        "tests/pipeline/test_pipeline_notebook.py",
        "tests/widgets/test_notebooks_execute.py",
        "tests/browser/test_notebooks_in_jupyterlab.py",
    ]
    of_03 = "tests/pipeline/test_pipeline_notebook.py::test_notebook_executes_and_shows_the_claims"
    nbclient = {
        of_03,
        "tests/widgets/test_notebooks_execute.py::test_01_runs_and_ends_with_the_live_explorer",
        "tests/widgets/test_notebooks_execute.py::test_02_tells_the_seed_story",
    }
    lab_claims = "tests/browser/test_notebooks_in_jupyterlab.py::test_the_notebooks_own_claims_hold_on_the_lab_run[03]"
    lab = importlib.util.find_spec("playwright") is not None and shutil.which("chromium")

    rc, both = _collected(*files)
    assert rc == 0 and lab_claims in both
    assert nbclient.isdisjoint(both) if lab else nbclient <= set(both), both

    rc, not_browser = _collected("-m", "not browser", *files)
    assert rc == 0 and nbclient <= set(not_browser), not_browser
    assert not any("jupyterlab" in t for t in not_browser)

    # -k keeps only 03's lab check: 01's and 02's nbclient runs stay, 03's is left out
    keep = "lab_run and 03 or shows_the_claims or test_01_runs or seed_story"
    rc, only_03 = _collected("-k", keep, *files)
    assert rc == 0 and lab_claims in only_03, only_03
    left = {t for t in nbclient if t in only_03}
    assert left == (nbclient - {of_03} if lab else nbclient), only_03


def test_a_notebooks_browser_tests_are_one_scheduling_unit_and_other_tests_their_own():
    lab = "tests/browser/test_notebooks_in_jupyterlab.py"
    assert (
        scheduling_unit(f"{lab}::test_run_all_executes_every_cell[03]")
        == scheduling_unit(f"{lab}::test_the_notebooks_own_claims_hold_on_the_lab_run[03]")
        == f"{lab}::[03]"
    )
    assert scheduling_unit(f"{lab}::test_run_all_executes_every_cell[04]") == f"{lab}::[04]"
    for alone in (
        "tests/pipeline/test_pipeline_notebook.py::test_notebook_executes_and_shows_the_claims",
        "tests/schedules/test_x.py::test_y[03]",
        f"{lab}::test_helper",
    ):
        assert scheduling_unit(alone) == alone
    for module in ONE_WORKER_MODULES:  # each names a module that exists
        assert (Path(__file__).parent / module).is_file(), module
    lessons = "tests/browser/test_lessons_in_chromium.py"
    assert (
        scheduling_unit(f"{lessons}::test_a_lesson_works_offline_from_its_file[01_x]")
        == scheduling_unit(f"{lessons}::test_a_lesson_works_offline_from_its_file[04_y]")
        == lessons
    )
