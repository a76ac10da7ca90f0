"""``explorer hlo-list``: every bad file or option is exit 2 and one line naming the constraint."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input
from .hlo_cases import file_cases

#: With --json the same refusals hold (the output format changes nothing about reading).
JSON_TOO = {
    "file-missing",
    "file-fifo",
    "file-corrupt-gzip",
    "file-parameter-5000-digits",
    "file-header-60000-spaces",
}

HLO_LIST_CASES = [
    *file_cases([]),
    *[c for c in file_cases(["--json"]) if c.id in JSON_TOO],
    Case("no-file", [], "required: FILE"),
    Case("two-files", ["{d}/good.hlo", "{d}/good.hlo"], "unrecognized arguments"),
    Case("unknown-option", ["{d}/good.hlo", "--groups"], "unrecognized arguments"),
    Case("json-with-value", ["{d}/good.hlo", "--json=1"], "ignored explicit argument"),
]


@pytest.mark.parametrize("case", [c.param() for c in HLO_LIST_CASES])
def test_hlo_list_bad_input(case: Case, bad) -> None:
    assert_bad_input(
        Case(case.id, ["hlo-list", *case.argv], case.needle, case.seconds, case.megabytes), bad
    )


def test_the_table_is_large_enough() -> None:
    assert len(HLO_LIST_CASES) >= 40


def test_a_5000_digit_source_line_is_not_a_line_number_but_the_module_reads(bad) -> None:
    """Metadata is provenance: a source_line of 5,000 digits (int() refuses over 4,300) is left unknown."""
    from .contract import run_cli

    ran = run_cli(["hlo-list", str(bad / "source_line_digits.hlo"), "--json"], str(bad))
    assert ran.returncode == 0, ran.stderr
    assert '"instructions": 2' in ran.stdout
