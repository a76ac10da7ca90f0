"""``explorer hlo-list``: every bad file or option is exit 2 and one line naming the constraint."""

from __future__ import annotations

import pytest

from .contract import (
    Case,
    assert_bad_input,
    assert_bad_input_in_process,
    call_cli,
    run_cli,
    tiers,
)
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


IN_PROCESS, THROUGH_THE_CLI = tiers(HLO_LIST_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_hlo_list_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("hlo-list"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_hlo_list_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("hlo-list"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(HLO_LIST_CASES) >= 40


@pytest.mark.parametrize(
    "run", [call_cli, pytest.param(run_cli, marks=pytest.mark.slow)], ids=["in-process", "cli"]
)
def test_a_5000_digit_source_line_is_not_a_line_number_but_the_module_reads(bad, run) -> None:
    """Metadata is provenance: a source_line of 5,000 digits (int() refuses over 4,300) is left unknown."""
    ran = run(["hlo-list", str(bad / "source_line_digits.hlo"), "--json"], str(bad))
    assert ran.returncode == 0, ran.stderr
    assert '"instructions": 2' in ran.stdout
