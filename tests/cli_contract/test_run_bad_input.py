"""``explorer run``: every bad invocation is refused before any rank starts: exit 2 and one line.

Parse-time refusals import no torch, so most of the table runs in a fraction of a second; the
few that need a user's module imported (``--model``) are the slow ones.
"""

from __future__ import annotations

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, tiers

R = ["--kind", "1f1b"]
P2M4 = ["--stages", "2", "--microbatches", "4"]
OK = [*R, *P2M4]
BIG = "9" * 5000
TORCH = dict(seconds=60.0, megabytes=2000, marks=(pytest.mark.slow,))

RUN_CASES = [
    Case(
        "stages-beyond-int64",
        [*R, "--stages", "99999999999999999999", "--microbatches", "4"],
        "limit of 64",
    ),
    Case("stages-5000-digits", [*R, "--stages", BIG, "--microbatches", "4"], "limit of 64"),
    # refused before a launch: given empty, --rules once ran the bare schedule without a word
    Case("rules-empty", [*OK, "--rules", ""], "names no rule"),
    Case(
        "stages-zero",
        [*R, "--stages", "0", "--microbatches", "4"],
        "stages must be a positive integer",
    ),
    Case(
        "stages-over-process-limit",
        [*R, "--stages", "1000", "--microbatches", "4"],
        "one process per rank",
    ),
    Case(
        "stages-word",
        [*R, "--stages", "two", "--microbatches", "4"],
        "stages must be a whole number",
    ),
    Case(
        "microbatches-100000", [*R, "--stages", "2", "--microbatches", "100000"], "limit of 4,096"
    ),
    Case(
        "microbatches-zero",
        [*R, "--stages", "2", "--microbatches", "0"],
        "micro-batches must be a positive integer",
    ),
    Case(
        "microbatches-beyond-int64",
        [*R, "--stages", "2", "--microbatches", "1" + "0" * 20],
        "limit of 4,096",
    ),
    Case(
        "microbatches-times-iterations",
        [*OK[:-1], "4096", "--iterations", "1000"],
        "micro-batch runs",
    ),
    Case(
        "chunks-beyond-int64",
        ["--kind", "interleaved-1f1b", *P2M4, "--chunks", "1" + "0" * 20],
        "limit of 16",
    ),
    Case(
        "chunks-zero",
        ["--kind", "interleaved-1f1b", *P2M4, "--chunks", "0"],
        "chunks must be a positive integer",
    ),
    Case("buffers-10e23", [*OK, "--buffers", "1" + "0" * 23], "limit of 65,536"),
    Case("buffers-word", [*OK, "--buffers", "many"], "--buffers 'many'"),
    Case("iterations-zero", [*OK, "--iterations", "0"], "iterations must be a positive integer"),
    Case("iterations-huge", [*OK, "--iterations", "100000000"], "limit of 1,000"),
    Case(
        "microbatch-size-zero",
        [*OK, "--microbatch-size", "0"],
        "micro-batch size must be a positive integer",
    ),
    Case("microbatch-size-huge", [*OK, "--microbatch-size", "1" + "0" * 20], "limit of 4,096"),
    Case(
        "seed-beyond-int64", [*OK, "--seed", "1" + "0" * 30], "limit of 9,223,372,036,854,775,807"
    ),
    Case("seed-negative", [*OK, "--seed", "-1"], "seed must be a integer of at least 0"),
    Case(
        "stall-timeout-nan",
        [*OK, "--stall-timeout", "nan"],
        "stall timeout must be a finite number",
    ),
    Case(
        "stall-timeout-inf",
        [*OK, "--stall-timeout", "inf"],
        "stall timeout must be a finite number",
    ),
    Case(
        "stall-timeout-1e400",
        [*OK, "--stall-timeout", "1e400"],
        "stall timeout must be a finite number",
    ),
    Case("stall-timeout-zero", [*OK, "--stall-timeout", "0"], "stall timeout must be more than 0"),
    Case(
        "stall-timeout-negative",
        [*OK, "--stall-timeout", "-5"],
        "stall timeout must be more than 0",
    ),
    Case("stall-timeout-a-year", [*OK, "--stall-timeout", "31536000"], "limit of 86400"),
    Case("stall-timeout-word", [*OK, "--stall-timeout", "soon"], "stall timeout must be a number"),
    Case("cuts-word", [*OK, "--cuts", "x"], "--cuts"),
    Case("cuts-10e30", [*OK, "--cuts", "1" + "0" * 30], "limit of 1,000,000"),
    Case("cuts-negative", [*OK, "--cuts", "-1"], "cut points must be a positive integer"),
    Case("out-onto-a-file", [*OK, "--out", "{d}/a_file"], "is a file, not a folder"),
    Case("out-under-a-file", [*OK, "--out", "{d}/a_file/run"], "cannot be created"),
    Case("out-empty", [*OK, "--out", ""], "path is empty"),
    Case("trace-into-missing-folder", [*OK, "--trace", "{d}/no/such/trace.json"], "does not exist"),
    Case("trace-onto-folder", [*OK, "--trace", "{d}/empty_dir"], "is a directory"),
    Case("trace-proc-version", [*OK, "--trace", "/proc/version"], "not writable"),
    Case("kind-missing", P2M4, "are required"),
    Case("kind-unknown", ["--kind", "zigzag", *P2M4], "invalid choice"),
    Case("stages-missing", [*R, "--microbatches", "4"], "are required"),
    Case(
        "backend-nccl-on-cpu", [*OK, "--backend", "nccl", "--device", "cpu"], "needs device='cuda'"
    ),
    Case("backend-unknown", [*OK, "--backend", "mpi"], "invalid choice"),
    Case(
        "engine-torch-with-trace",
        [*OK, "--engine", "torch", "--trace", "{d}/t.json"],
        "--trace writes the explorer",
    ),
    Case("model-no-colon", [*OK, "--model", "resnet"], "is not a model"),
    Case("model-empty-module", [*OK, "--model", ":build"], "expected MODULE:"),
    Case("model-bad-function-name", [*OK, "--model", "mymod:1x"], "is not a Python name"),
    Case("model-5000-chars", [*OK, "--model", "m" * 5000], "characters"),
    Case("model-missing-module", [*OK, "--model", "no_such_module:fn"], "cannot import", **TORCH),
    Case(
        "model-import-raises", [*OK, "--model", "import_raises:model"], "broken at import", **TORCH
    ),
    Case("model-syntax-error", [*OK, "--model", "syntax_error:model"], "syntax error", **TORCH),
    Case("model-import-exit", [*OK, "--model", "import_exit:model"], "SystemExit", **TORCH),
    Case(
        "model-returns-int",
        [*OK, "--model", "not_a_class:model"],
        "must return (layers, loss_fn, data_fn)",
        **TORCH,
    ),
    Case("model-calls-sys-exit", [*OK, "--model", "model_exit:build"], "SystemExit", **TORCH),
    Case(
        "model-raises-keyboard-interrupt",
        [*OK, "--model", "model_keyboard:build"],
        "KeyboardInterrupt",
        **TORCH,
    ),
    Case("model-segfaults", [*OK, "--model", "model_segfault:build"], "SIGSEGV", **TORCH),
    Case("collect-missing-folder", ["--collect", "{d}/no_such_run"], "does not exist"),
    Case("collect-a-file", ["--collect", "{d}/a_file"], "is not a folder"),
    Case("collect-no-spec", ["--collect", "{d}/empty_dir"], "holds no spec.json"),
    Case("collect-garbage-spec", ["--collect", "{d}/run_garbage"], "is not JSON"),
    Case("collect-empty-spec", ["--collect", "{d}/run_empty"], "is not JSON"),
    Case("collect-list-spec", ["--collect", "{d}/run_list"], "JSON list"),
    Case("collect-string-spec", ["--collect", "{d}/run_string"], "JSON str"),
    Case("collect-wrongly-typed-spec", ["--collect", "{d}/run_types"], "microbatch_size"),
    Case("collect-unknown-key", ["--collect", "{d}/run_unknown_key"], "surprise"),
    Case("collect-no-schedule", ["--collect", "{d}/run_no_schedule"], "no schedule object"),
    # the folder's spec says what ran: options that would describe another run were ignored
    Case("collect-with-a-schedule", ["--collect", "{d}/run_garbage", *OK], "drop --kind"),
    Case("collect-with-out", ["--collect", "{d}/run_garbage", "--out", "{d}/o"], "drop --out"),
    Case("collect-bad-schedule", ["--collect", "{d}/run_bad_schedule"], "'streams' must be a list"),
    Case("collect-schedule-list", ["--collect", "{d}/run_schedule_list"], "no schedule object"),
    Case(
        "collect-5000-digit-instruction",
        ["--collect", "{d}/run_bad_instr"],
        "longer than 40 characters",
    ),
    Case(
        "collect-huge-stage",
        ["--collect", "{d}/run_big_stage"],
        "stage_to_rank must be a list of rank integers",
    ),
    Case("collect-model-string", ["--collect", "{d}/run_model_type"], "'model' must be an object"),
    Case("collect-nan-in-spec", ["--collect", "{d}/run_nan_timeout"], "NaN"),
    Case("collect-100000-deep-spec", ["--collect", "{d}/run_deep"], "levels deep"),
    Case("collect-latin1-spec", ["--collect", "{d}/run_latin1"], "not UTF-8"),
    Case("collect-spec-is-folder", ["--collect", "{d}/run_spec_dir"], "is a directory"),
    Case("collect-spec-is-fifo", ["--collect", "{d}/run_spec_fifo"], "FIFO"),
    Case(
        "collect-rank-not-json",
        ["--collect", "{d}/run_rank_garbage"],
        "rank0.jsonl line 1 is not JSON",
    ),
    Case(
        "collect-rank-json-list",
        ["--collect", "{d}/run_rank_list"],
        "rank0.jsonl line 1 is not a record",
    ),
    Case("collect-rank-without-rank", ["--collect", "{d}/run_rank_norank"], "integer 'rank'"),
    Case("collect-rank-string-rank", ["--collect", "{d}/run_rank_badrank"], "integer 'rank'"),
    Case("collect-rank-latin1", ["--collect", "{d}/run_rank_latin1"], "not UTF-8"),
    Case("collect-result-garbage", ["--collect", "{d}/run_result_garbage"], "is not JSON"),
    Case("collect-result-list", ["--collect", "{d}/run_result_list"], "is not the result"),
    Case(
        "collect-with-torch-engine",
        ["--collect", "{d}/run_types", "--engine", "torch"],
        "drop --engine torch",
    ),
    Case("unknown-option", [*OK, "--ranks", "2"], "unrecognized arguments"),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(RUN_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_run_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("run"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_run_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("run"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(RUN_CASES) >= 40
