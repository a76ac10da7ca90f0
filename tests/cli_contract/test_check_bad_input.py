"""``explorer check``: every bad invocation is exit 2 and one line naming the constraint."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input
from .schedule_cases import SCHEDULE_OPTION_CASES

CHECK_CASES = [
    *SCHEDULE_OPTION_CASES,
    Case(
        "check-format-is-schedule-only",
        ["--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--format", "csv"],
        "unrecognized arguments",
    ),
    Case(
        "check-json-takes-no-value",
        ["--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--json=yes"],
        "ignored explicit argument",
    ),
]


@pytest.mark.parametrize("case", [c.param() for c in CHECK_CASES])
def test_check_bad_input(case: Case, bad) -> None:
    assert_bad_input(
        Case(case.id, ["check", *case.argv], case.needle, case.seconds, case.megabytes), bad
    )


def test_the_table_is_large_enough() -> None:
    assert len(CHECK_CASES) >= 40
