"""``explorer xla-run``: every bad invocation is refused in the parent, before torch_xla starts: exit 2, one line."""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, tiers

S = ["--scenario", "steady"]
BIG = "9" * 5000
XLA = dict(seconds=120.0, megabytes=3000, marks=(pytest.mark.slow,))

XLA_RUN_CASES = [
    Case("timeout-nan", [*S, "--timeout", "nan"], "timeout must be a finite number"),
    Case("timeout-inf", [*S, "--timeout", "inf"], "timeout must be a finite number"),
    Case("timeout-1e400", [*S, "--timeout", "1e400"], "timeout must be a finite number"),
    Case("timeout-zero", [*S, "--timeout", "0"], "timeout must be more than 0"),
    Case("timeout-negative", [*S, "--timeout", "-3"], "timeout must be more than 0"),
    Case("timeout-a-year", [*S, "--timeout", "31536000"], "limit of 86400"),
    Case("timeout-word", [*S, "--timeout", "later"], "timeout must be a number"),
    Case("bucket-mb-nan", [*S, "--bucket-mb", "nan"], "bucket size (MB) must be a finite number"),
    Case("bucket-mb-inf", [*S, "--bucket-mb", "inf"], "bucket size (MB) must be a finite number"),
    Case("bucket-mb-negative", [*S, "--bucket-mb", "-1"], "bucket size (MB) must be at least 0"),
    Case("bucket-mb-1e400", [*S, "--bucket-mb", "1e400"], "finite"),
    Case("bucket-mb-petabyte", [*S, "--bucket-mb", "1e9"], "limit of 1e+06"),
    Case("steps-negative", [*S, "--steps", "-1"], "steps must be a positive integer"),
    # 0 once ran the preset's 6 steps: a number that means something else is refused
    Case("steps-zero", [*S, "--steps", "0"], "steps must be a positive integer"),
    Case("steps-501", [*S, "--steps", "501"], "limit of 500"),
    Case("steps-beyond-int64", [*S, "--steps", "99999999999999999999"], "limit of 500"),
    Case("steps-5000-digits", [*S, "--steps", BIG], "limit of 500"),
    Case("steps-word", [*S, "--steps", "six"], "steps must be a whole number"),
    Case("layers-zero", [*S, "--layers", "0"], "layers must be a positive integer"),
    Case("layers-13", [*S, "--layers", "13"], "limit of 12"),
    Case("layers-beyond-int64", [*S, "--layers", "1" + "0" * 20], "limit of 12"),
    Case("width-zero", [*S, "--width", "0"], "width must be a positive integer"),
    Case("width-odd", [*S, "--width", "33"], "must be even"),
    Case("width-2048", [*S, "--width", "2048"], "limit of 1,024"),
    Case(
        "virtual-devices-zero",
        [*S, "--fsdp", "v2", "--virtual-devices", "0"],
        "virtual devices must be a positive",
    ),
    Case(
        "virtual-devices-huge",
        [*S, "--fsdp", "v2", "--virtual-devices", "1" + "0" * 20],
        "limit of 64",
    ),
    Case(
        "virtual-devices-not-dividing",
        [*S, "--fsdp", "v2", "--virtual-devices", "3"],
        "must be divisible",
    ),
    Case("fsdp-unknown", [*S, "--fsdp", "v3"], "invalid choice"),
    Case(
        "live-report-negative",
        [*S, "--live-report", "-1"],
        "live report threshold must be a node count of at least 0",
    ),
    Case("live-report-huge", [*S, "--live-report", "1" + "0" * 30], "limit of 2,147,483,647"),
    Case(
        "lines-settle-negative",
        [*S, "--lines-settle", "-2"],
        "lines settle must be a number of steps of at least 0",
    ),
    Case("lines-settle-huge", [*S, "--lines-settle", "100000"], "limit of 500"),
    Case("fsdp-option-no-value", [*S, "--fsdp-option", "novalue"], "expected KEY=VALUE"),
    Case("fsdp-option-empty-key", [*S, "--fsdp-option", "=1"], "expected KEY=VALUE"),
    Case("fsdp-option-bad-key", [*S, "--fsdp-option", "a b=1"], "not a keyword argument name"),
    Case("fsdp-option-nan", [*S, "--fsdp-option", "x=NaN"], "NaN"),
    # a name FSDP does not take is bad input, found in the child before anything is wrapped
    # (its TypeError was a failed run, exit 1)
    Case(
        "fsdp-option-unknown",
        [*S, "--layers", "1", "--steps", "2", "--fsdp-option", "x={bad"],
        "XlaFullyShardedDataParallel takes no option 'x'",
        **XLA,
    ),
    Case(
        "fsdp-option-deep", [*S, "--fsdp-option", "x=" + "[" * 30_000 + "]" * 30_000], "recursion"
    ),
    Case("model-unknown", [*S, "--model", "resnet"], "choose one of encoder"),
    Case("scenario-unknown", ["--scenario", "zigzag"], "invalid choice"),
    Case("scenario-and-step", [*S, "--step", "m:f"], "not allowed with argument"),
    Case(
        "neither-scenario-nor-step",
        ["--steps", "3"],
        "one of the arguments --scenario --step is required",
    ),
    Case("step-no-colon", ["--step", "nocolon"], "expected MODULE:"),
    Case("step-empty-module", ["--step", ":step"], "expected MODULE:"),
    Case("step-bad-name", ["--step", "train:-x"], "is not a Python name"),
    Case("step-missing-file", ["--step", "{d}/no_such.py:step"], "does not exist"),
    Case("step-5000-chars", ["--step", "a b" * 2000 + ":step"], "characters"),
    Case("out-onto-a-file", [*S, "--out", "{d}/a_file"], "is a file, not a folder"),
    Case("out-under-a-file", [*S, "--out", "{d}/a_file/x"], "cannot be created"),
    Case("out-empty", [*S, "--out", ""], "path is empty"),
    Case("unknown-option", [*S, "--stepz", "3"], "unrecognized arguments"),
    Case(
        "step-missing-module",
        ["--step", "no_such_module:step", "--steps", "1"],
        "no_such_module",
        **XLA,
    ),
    Case("step-syntax-error", ["--step", "syntax_error:step", "--steps", "1"], "syntax", **XLA),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(XLA_RUN_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_xla_run_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("xla-run"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_xla_run_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("xla-run"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(XLA_RUN_CASES) >= 40
