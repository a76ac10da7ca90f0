"""``explorer hlo-diff``: every bad file, module choice or output path is exit 2 and one line."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, tiers
from .hlo_cases import file_cases

GOOD, TWO = "{d}/good.hlo", "{d}/two.hlo"
BIG = "9" * 5000

#: Bad files tried as B too (each side is read the same way).
AS_B = {
    "file-missing",
    "file-dev-zero",
    "file-latin1-bytes",
    "file-corrupt-gzip",
    "file-parameter-5000-digits",
    "file-operands-40000-comments",
    "file-cycle",
}

HLO_DIFF_CASES = [
    *file_cases([], [GOOD]),  # the bad file as A
    *[c for c in file_cases([GOOD]) if c.id in AS_B],  # the bad file as B
    Case("one-file-no-module", [GOOD], "needs two files"),
    Case("three-files", [GOOD, GOOD, GOOD], "needs two files"),
    Case(
        "three-modules", [TWO, "--module", "0", "--module", "1", "--module", "0"], "needs two files"
    ),
    Case("one-file-one-module", [TWO, "--module", "0"], "needs two files"),
    Case("several-modules-no-choice", [TWO, GOOD], "choose one with --module"),
    Case("module-index-out-of-range", [TWO, "--module", "9", "--module", "0"], "out of range"),
    Case(
        "module-index-beyond-int64",
        [TWO, "--module", "99999999999999999999", "--module", "0"],
        "out of range",
    ),
    Case("module-negative-out-of-range", [TWO, "--module", "-3", "--module", "0"], "out of range"),
    Case("module-5000-digits", [TWO, "--module", BIG, "--module", "0"], "characters"),
    Case("module-5000-chars-name", [TWO, "--module", "x" * 5000, "--module", "0"], "characters"),
    Case("module-unknown-name", [TWO, "--module", "nope", "--module", "0"], "no module named"),
    Case("module-empty-name", [TWO, "--module", "", "--module", "0"], "no module named"),
    Case("html-missing-folder", [GOOD, GOOD, "--html", "{d}/no/such/diff.html"], "does not exist"),
    Case("html-onto-folder", [GOOD, GOOD, "--html", "{d}/empty_dir"], "is a directory"),
    Case("html-dev-full", [GOOD, GOOD, "--html", "/dev/full"], "No space left on device"),
    Case("html-proc-version", [GOOD, GOOD, "--html", "/proc/version"], "not writable"),
    Case("html-fifo-no-reader", [GOOD, GOOD, "--html", "{d}/fifo"], "no process reads"),
    Case("html-parent-is-file", [GOOD, GOOD, "--html", "{d}/a_file/diff.html"], "not a directory"),
    Case("no-files", [], "required: FILE"),
    Case("unknown-option", [GOOD, GOOD, "--side-by-side"], "unrecognized arguments"),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(HLO_DIFF_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_hlo_diff_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("hlo-diff"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_hlo_diff_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("hlo-diff"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(HLO_DIFF_CASES) >= 40
