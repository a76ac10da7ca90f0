"""``explorer schedule``: every bad invocation is exit 2 and one line naming the constraint."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, tiers
from .schedule_cases import SCHEDULE_OPTION_CASES

OK = ["--kind", "1f1b", "--stages", "4", "--microbatches", "8"]

#: The schedule options are parsed by the same code for check and schedule: check runs them all,
#: schedule every other one (so both commands are covered, and the tier stays fast).
SCHEDULE_CASES = [
    *SCHEDULE_OPTION_CASES[::2],
    Case("out-missing-folder", [*OK, "--out", "{d}/no/such/folder/x.txt"], "does not exist"),
    Case("out-onto-folder", [*OK, "--out", "{d}/empty_dir"], "is a directory"),
    Case("out-parent-is-file", [*OK, "--out", "{d}/a_file/x.txt"], "not a directory"),
    Case("out-dev-full", [*OK, "--out", "/dev/full"], "No space left on device"),
    Case("out-proc-version", [*OK, "--out", "/proc/version"], "not writable"),
    Case("out-fifo-no-reader", [*OK, "--out", "{d}/fifo"], "FIFO that no process reads"),
    Case("out-empty", [*OK, "--out", ""], "path is empty"),
    Case("format-unknown", [*OK, "--format", "pdf"], "invalid choice"),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(SCHEDULE_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_schedule_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("schedule"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_schedule_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("schedule"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(SCHEDULE_CASES) >= 40
