"""``explorer check``: every bad invocation is exit 2 and one line naming the constraint."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, tiers
from .schedule_cases import SCHEDULE_OPTION_CASES

CHECK_CASES = [
    *SCHEDULE_OPTION_CASES,
    Case(
        "check-format-is-schedule-only",
        ["--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--format", "csv"],
        "unrecognized arguments",
    ),
    # A sweep's verdicts use neither: refused, never silently ignored.
    Case(
        "check-sweep-with-costs",
        ["--kind", "1f1b", "--sweep", "2-3:1-2", "--workers", "1", "--costs", "F=-5"],
        "drop --costs",
    ),
    Case(
        "check-sweep-with-stage",
        ["--kind", "1f1b", "--sweep", "2-3:1-2", "--workers", "1", "--stage", "99"],
        "drop --stage",
    ),
    # one size is checked in this process: --workers once was ignored without a word
    Case(
        "check-workers-without-sweep",
        ["--kind", "1f1b", *["--stages", "4"], *["--microbatches", "8"], "--workers", "3"],
        "add --sweep",
    ),
    Case(
        "check-sweep-rules-empty",
        ["--kind", "1f1b", "--sweep", "2-3:1-2", "--rules", ""],
        "names no rule",
    ),
    # argparse reads a value that starts with '-' as an option: the line says so, and how
    Case("check-sweep-dash-range", ["--kind", "1f1b", "--sweep", "-1:1"], "write --sweep=-1:1"),
    # a count of many digits is still a count: the line says the limit, as it does for 5000
    Case(
        "check-sweep-huge-count",
        ["--kind", "1f1b", "--sweep", "2-4:1-100000000"],
        "must be between 1 and 4096",
    ),
    Case(
        "check-json-takes-no-value",
        ["--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--json=yes"],
        "ignored explicit argument",
    ),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(CHECK_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_check_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("check"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_check_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("check"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(CHECK_CASES) >= 40


def test_an_option_prefix_is_not_taken_for_the_option() -> None:
    """argparse took `doctor --stage 1` for `--stages 1`: the refusal then spoke of a plan of
    one stage that nobody asked for. A prefix is now an unknown option, said in one line."""
    from cli_in_process import call_cli

    for argv in (
        ["check", "--kind", "1f1b", "--stages", "2", "--micro", "4"],
        ["doctor", "1", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stage", "1"],
    ):
        out = call_cli(argv)
        assert out.returncode == 2 and "unrecognized arguments" in out.stderr, out.stderr
        assert len(out.stderr.splitlines()) == 1
