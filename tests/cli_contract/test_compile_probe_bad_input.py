"""``explorer compile-probe``: every bad invocation is exit 2 and one line; a failing --step is a structured failure.

Parse-time and --config refusals import no torch. A ``--step`` runs in a child process, so a
step that calls ``sys.exit``, raises ``KeyboardInterrupt``, segfaults or sleeps gives exit 1 and
one line (the input was valid, the user's code failed), with ``--json`` a document saying so.
"""

from __future__ import annotations

import json

import pytest

from .contract import Case, assert_bad_input, assert_bad_input_in_process, run_cli, tiers

S = ["--scenario", "cycling"]
BIG = "9" * 5000
TORCH = dict(seconds=90.0, megabytes=2500, marks=(pytest.mark.slow,))
#: Refused by the child that loads the step (a name of 5,000 characters is a valid module name).
CHILD = dict(marks=(pytest.mark.slow,))


def cfg(name: str) -> list[str]:
    return [*S, "--config", "{d}/" + name]


COMPILE_PROBE_CASES = [
    Case("iterations-zero", [*S, "--iterations", "0"], "iterations must be a positive integer"),
    Case(
        "iterations-negative", [*S, "--iterations", "-5"], "iterations must be a positive integer"
    ),
    Case("iterations-100000000", [*S, "--iterations", "100000000"], "limit of 10,000"),
    Case(
        "iterations-beyond-int64", [*S, "--iterations", "99999999999999999999"], "limit of 10,000"
    ),
    Case("iterations-5000-digits", [*S, "--iterations", BIG], "limit of 10,000"),
    Case("iterations-word", [*S, "--iterations", "many"], "iterations must be a whole number"),
    Case("iterations-float", [*S, "--iterations", "1e3"], "iterations must be a whole number"),
    Case("timeout-nan", [*S, "--timeout", "nan"], "timeout must be a finite number"),
    Case("timeout-inf", [*S, "--timeout", "inf"], "timeout must be a finite number"),
    Case("timeout-zero", [*S, "--timeout", "0"], "timeout must be more than 0"),
    Case("timeout-negative", [*S, "--timeout", "-1"], "timeout must be more than 0"),
    Case("timeout-a-year", [*S, "--timeout", "31536000"], "limit of 86400"),
    Case("config-missing", cfg("no_such.json"), "no such file"),
    Case("config-directory", cfg("empty_dir"), "is a directory"),
    Case("config-fifo", cfg("fifo"), "FIFO"),
    Case("config-dev-zero", [*S, "--config", "/dev/zero"], "device"),
    Case("config-over-size-limit", cfg("huge.json"), "MiB limit"),
    Case("config-json-list", cfg("list.json"), "holds a JSON list"),
    Case("config-json-string", cfg("string.json"), "holds a JSON str"),
    Case("config-json-number", cfg("number.json"), "holds a JSON int"),
    Case("config-json-null", cfg("null.json"), "holds a JSON NoneType"),
    Case("config-latin1", cfg("latin1.json"), "not UTF-8"),
    Case("config-utf16", cfg("bom16.json"), "not UTF-8"),
    Case("config-100000-deep", cfg("deep.json"), "levels deep"),
    Case("config-100-deep", cfg("deep100.json"), "levels deep"),
    Case("config-50000-deep-objects", cfg("deep_obj.json"), "levels deep"),
    Case("config-not-json", cfg("notjson.json"), "is not JSON"),
    Case("config-empty", cfg("empty.json"), "is not JSON"),
    Case("config-nan", cfg("nan.json"), "NaN"),
    Case("config-infinity", cfg("inf.json"), "Infinity"),
    Case("config-5000-digit-number", cfg("bigint.json"), "digits"),
    Case("config-section-list", cfg("section_list.json"), "must be a mapping"),
    Case("config-unknown-key", cfg("unknown_key.json"), "unknown key(s) 'enable'"),
    Case("config-backend-number", cfg("backend_num.json"), "compile.backend must be"),
    Case("config-enabled-string", cfg("enabled_str.json"), "compile.enabled must be true or false"),
    Case("config-kwargs-list", cfg("kwargs_list.json"), "compile.kwargs must be a mapping"),
    Case("config-kwargs-unknown", cfg("kwargs_bad.json"), "'bogus'"),
    Case("config-mode-and-options", cfg("mode_options.json"), "not both"),
    Case("backend-empty", [*S, "--backend", ""], "is not a backend"),
    Case("backend-spaces", [*S, "--backend", "in ductor"], "is not a backend"),
    Case("backend-5000-chars", [*S, "--backend", "b" * 5000 + "-"], "characters"),
    Case("scenario-unknown", ["--scenario", "zigzag"], "invalid choice"),
    Case("scenario-and-step", [*S, "--step", "m:f"], "not allowed with argument"),
    Case(
        "neither-scenario-nor-step",
        ["--iterations", "3"],
        "one of the arguments --scenario --step is required",
    ),
    Case("source-unknown", [*S, "--source", "tea-leaves"], "invalid choice"),
    Case("step-no-colon", ["--step", "train"], "expected MODULE:"),
    Case("step-empty-module", ["--step", ":step"], "expected MODULE:"),
    Case("step-empty-function", ["--step", "train:"], "expected MODULE:"),
    Case("step-bad-function-name", ["--step", "train:1step"], "is not a Python name"),
    Case("step-5000-chars", ["--step", "m" * 5000 + ":step"], "characters", **CHILD),
    Case(
        "step-with-backend",
        ["--step", "not_a_class:step", "--backend", "eager"],
        "apply to --scenario",
    ),
    Case(
        "step-with-config",
        ["--step", "not_a_class:step", "--config", "{d}/list.json"],
        "apply to --scenario",
    ),
    Case("step-missing-file", ["--step", "{d}/no_such_train.py:step"], "does not exist", **TORCH),
    Case("step-missing-module", ["--step", "no_such_module:step"], "cannot import module", **TORCH),
    Case("step-import-raises", ["--step", "import_raises:step"], "broken at import", **TORCH),
    Case("step-syntax-error", ["--step", "syntax_error:step"], "syntax error", **TORCH),
    Case("step-syntax-error-file", ["--step", "{d}/syntax_error.py:step"], "syntax error", **TORCH),
    Case("step-import-exit", ["--step", "import_exit:step"], "SystemExit", **TORCH),
    Case("step-not-callable", ["--step", "not_a_class:Sched"], "not a function", **TORCH),
    Case("step-no-argument", ["--step", "step_no_args:step"], "must accept one argument", **TORCH),
    Case("step-async", ["--step", "step_async:step"], "is an async def", **TORCH),
    Case("step-generator", ["--step", "step_generator:step"], "is a generator", **TORCH),
    Case(
        "step-missing-function",
        ["--step", "not_a_class:nothing"],
        "has no attribute 'nothing'",
        **TORCH,
    ),
    Case(
        "config-backend-missing-module",
        cfg("backend_missing.json"),
        "cannot import module",
        **TORCH,
    ),
    Case("unknown-option", [*S, "--iterationz", "3"], "unrecognized arguments"),
]


IN_PROCESS, THROUGH_THE_CLI = tiers(COMPILE_PROBE_CASES)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_compile_probe_bad_input(case: Case, bad) -> None:
    assert_bad_input_in_process(case.under("compile-probe"), bad)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_compile_probe_bad_input_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case.under("compile-probe"), bad)


def test_the_table_is_large_enough() -> None:
    assert len(COMPILE_PROBE_CASES) >= 40


@pytest.mark.slow
@pytest.mark.parametrize(
    "module, words, timeout",
    [
        ("step_exit", "exit code 3", "60"),
        ("step_os_exit", "exit code 3", "60"),
        # 0 once passed through as "nothing found" and 2 as bad input, both with no word said
        ("step_exit0", "exit code 0", "60"),
        ("step_exit2", "exit code 2", "60"),
        # the probe's end line written by the step: read as a clean run (exit 0), or bad input
        ("step_says_done", "exit code 0", "60"),
        ("step_says_error", "exit code 2", "60"),
        ("step_keyboard", "KeyboardInterrupt", "60"),
        ("step_segfault", "SIGSEGV", "60"),
        # Sleeps for good: any limit gives the same verdict, so a short one (the wait is idle).
        ("step_sleeps", "did not finish within 6 s", "6"),
    ],
)
def test_a_step_that_ends_its_process_is_a_structured_failure(bad, module, words, timeout) -> None:
    """The input is valid, the user's code fails: exit 1, one line, and a JSON document that says so.

    The steps that end their process get a limit they never come near, even on a busy machine.
    """
    ran = run_cli(
        [
            "compile-probe",
            "--step",
            f"{module}:step",
            "--iterations",
            "3",
            "--timeout",
            timeout,
            "--json",
        ],
        str(bad),
    )
    assert ran.returncode == 1, ran.stderr[-2000:]
    lines = ran.stderr.splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in ran.stderr, ran.stderr[
        -2000:
    ]
    doc = json.loads(ran.stdout)
    assert doc["ok"] is False and words in doc["failure"]["message"]
    assert doc["kind"] == "compile"  # the document of a probe that ran through, failed
    assert ran.seconds < 120


def test_an_empty_torch_trace_is_refused_before_torch_starts(monkeypatch, tmp_path) -> None:
    """``TORCH_TRACE=`` (set, empty) made torch fail at the first compile opening '' (exit 1,
    a FileNotFoundError); it is the user's setting, so it is bad input named in one line."""
    from cli_in_process import call_cli

    monkeypatch.setenv("TORCH_TRACE", "")
    ran = call_cli(["compile-probe", *S, "--iterations", "4"], tmp_path)
    assert ran.returncode == 2 and "TORCH_TRACE is set but empty" in ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and not ran.stdout


@pytest.mark.parametrize(
    "where, words",
    [("a_file.py", "is a file, not a folder"), ("/proc/self/trace", "is not writable")],
    ids=["a-file", "proc"],
)
def test_a_torch_trace_no_folder_can_be_made_at_is_refused(monkeypatch, tmp_path, where, words):
    """``TORCH_TRACE`` naming a file (or a place no folder can be made) failed inside the step:
    "the step failed at iteration 0: FileExistsError", exit 1, as if the user's code had."""
    from cli_in_process import call_cli

    (tmp_path / "a_file.py").write_text("x = 1\n")
    monkeypatch.setenv("TORCH_TRACE", str(tmp_path / where) if not where.startswith("/") else where)
    ran = call_cli(["compile-probe", *S, "--iterations", "4"], tmp_path)
    assert ran.returncode == 2 and words in ran.stderr, ran.stderr
    assert len(ran.stderr.strip().splitlines()) == 1 and not ran.stdout
    assert (tmp_path / "a_file.py").read_text() == "x = 1\n"


@pytest.mark.slow
def test_what_the_step_prints_stays_out_of_the_json(bad) -> None:
    """A step's ``print`` came before the document on stdout: ``--json`` gave no JSON at all."""
    ran = run_cli(
        ["compile-probe", "--step", "step_chatty:step", "--iterations", "3", "--json"], str(bad)
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    doc = json.loads(ran.stdout)
    assert doc["ok"] is True and len(doc["iterations"]) == 3
    assert "loaded" in ran.stderr and "iteration 2" in ran.stderr, ran.stderr[-2000:]
