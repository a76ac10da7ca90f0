"""Bad invocations shared by ``explorer check`` and ``explorer schedule`` (their schedule options)."""

from __future__ import annotations

import pytest

from .contract import Case

K = ["--kind", "1f1b"]
P4M8 = ["--stages", "4", "--microbatches", "8"]
BIG = "9" * 5000


#: ``--from MODULE:CLASS`` loads the user's class in a child process (so that a segfault or an
#: endless generator cannot take the CLI with it): such cases are in the slow tier only.
CHILD = dict(marks=(pytest.mark.slow,))


def _from(module: str, *extra: str, stages: str = "2", microbatches: str = "3") -> list[str]:
    return ["--from", f"{module}:Sched", "--stages", stages, "--microbatches", microbatches, *extra]


SCHEDULE_OPTION_CASES = [
    # numbers beyond int64, beyond the limits, or not numbers
    Case(
        "stages-beyond-int64",
        [*K, "--stages", "99999999999999999999", "--microbatches", "8"],
        "limit of 1,024",
    ),
    Case("stages-5000-digits", [*K, "--stages", BIG, "--microbatches", "8"], "limit of 1,024"),
    Case(
        "stages-negative",
        [*K, "--stages", "-3", "--microbatches", "8"],
        "stages must be a positive integer",
    ),
    Case(
        "stages-zero",
        [*K, "--stages", "0", "--microbatches", "8"],
        "stages must be a positive integer",
    ),
    Case(
        "stages-word",
        [*K, "--stages", "four", "--microbatches", "8"],
        "stages must be a whole number",
    ),
    Case(
        "stages-float",
        [*K, "--stages", "4.0", "--microbatches", "8"],
        "stages must be a whole number",
    ),
    Case(
        "stages-hex",
        [*K, "--stages", "0x10", "--microbatches", "8"],
        "stages must be a whole number",
    ),
    Case(
        "stages-empty", [*K, "--stages", "", "--microbatches", "8"], "stages must be a whole number"
    ),
    Case("stages-over-limit", [*K, "--stages", "100000", "--microbatches", "1"], "limit of 1,024"),
    Case(
        "microbatches-beyond-int64",
        [*K, "--stages", "4", "--microbatches", "99999999999999999999"],
        "limit of 65,536",
    ),
    Case(
        "microbatches-zero",
        [*K, "--stages", "4", "--microbatches", "0"],
        "micro-batches must be a positive integer",
    ),
    Case(
        "microbatches-nan",
        [*K, "--stages", "4", "--microbatches", "nan"],
        "micro-batches must be a whole number",
    ),
    Case(
        "size-20000-squared",
        [*K, "--stages", "1000", "--microbatches", "20000"],
        "more than the limit of 1,048,576",
    ),
    Case(
        "size-100000-squared",
        [*K, "--stages", "100000", "--microbatches", "100000"],
        "limit of 1,024",
    ),
    Case(
        "size-interleaved-chunks",
        ["--kind", "interleaved-1f1b", "--stages", "512", "--microbatches", "512", "--chunks", "4"],
        "limit of 1,024",
    ),
    Case(
        "size-dualpipev-doubles",
        ["--kind", "dualpipev", "--stages", "600", "--microbatches", "1200"],
        "limit of 1,024",
    ),
    Case(
        "chunks-beyond-int64",
        ["--kind", "interleaved-1f1b", *P4M8, "--chunks", "10" + "0" * 20],
        "limit of 1,024",
    ),
    Case(
        "chunks-zero",
        ["--kind", "interleaved-1f1b", *P4M8, "--chunks", "0"],
        "chunks must be a positive integer",
    ),
    Case("chunks-on-1f1b", [*K, *P4M8, "--chunks", "3"], "applies only to interleaved-1f1b"),
    Case(
        "interleaved-not-multiple",
        ["--kind", "interleaved-1f1b", "--stages", "4", "--microbatches", "6", "--chunks", "2"],
        "multiple of stages",
    ),
    Case(
        "dualpipev-too-few",
        ["--kind", "dualpipev", "--stages", "4", "--microbatches", "6"],
        "at least that many",
    ),
    Case("buffers-10e23", [*K, *P4M8, "--buffers", "1" + "0" * 23], "limit of 65,536"),
    Case(
        "buffers-negative",
        [*K, *P4M8, "--buffers", "-1"],
        "buffer counts must be a positive integer",
    ),
    Case("buffers-zero", [*K, *P4M8, "--buffers", "0"], "buffer counts must be a positive integer"),
    Case("buffers-word", [*K, *P4M8, "--buffers", "zero"], "--buffers 'zero'"),
    Case("buffers-nan", [*K, *P4M8, "--buffers", "nan"], "--buffers 'nan'"),
    Case("buffers-empty-item", [*K, *P4M8, "--buffers", "1,,2"], "comma-separated"),
    Case("buffers-wrong-count", [*K, *P4M8, "--buffers", "1,2"], "2 buffer counts for 4 stages"),
    Case(
        "buffers-legacy-on-1f1b",
        [*K, *P4M8, "--buffers", "legacy"],
        "applies only to deepspeed-train",
    ),
    Case("buffers-list-huge-item", [*K, *P4M8, "--buffers", "1,2,3," + BIG], "limit of 65,536"),
    Case(
        "inference-buffers",
        ["--kind", "deepspeed-inference", *P4M8, "--buffers", "3"],
        "always alternates two",
    ),
    Case(
        "order-on-gpipe",
        ["--kind", "gpipe", *P4M8, "--order", "legacy"],
        "--order applies only to deepspeed-train",
    ),
    Case(
        "order-unknown",
        ["--kind", "deepspeed-train", *P4M8, "--order", "sideways"],
        "invalid choice",
    ),
    Case("stage-beyond-int64", [*K, *P4M8, "--stage", "99999999999999999999"], "limit of 2,048"),
    Case(
        "stage-negative",
        [*K, *P4M8, "--stage", "-1"],
        "--stage must be a stage index of at least 0",
    ),
    Case("stage-outside", [*K, *P4M8, "--stage", "9"], "outside stages 0..3"),
    # DeepSpeed's inference schedule alternates two buffers whatever it is told
    *(
        Case(
            f"inference-buffers-{b}",
            ["--kind", "deepspeed-inference", *P4M8, "--buffers", b],
            "always alternates two buffers; drop --buffers",
        )
        for b in ("minimal", "fixed")
    ),
    # a --from schedule is not built by the generator's options: refused, never ignored (the
    # refusal comes before the class is imported, so these need no child)
    Case("from-class-with-buffers", _from("sched_ok", "--buffers", "legacy"), "drop --buffers"),
    Case("from-class-with-order", _from("sched_ok", "--order", "fixed"), "drop --order"),
    Case("from-class-with-chunks", _from("sched_ok", "--chunks", "2"), "drop --chunks"),
    Case(
        "from-csv-with-sizes",
        ["--from", "{d}/order.csv", *P4M8],
        "a CSV holds one schedule of one size",
    ),
    # costs: non-finite, huge, malformed
    Case("costs-inf", [*K, *P4M8, "--costs", "B=inf"], "finite"),
    Case("costs-1e400", [*K, *P4M8, "--costs", "F=1e400"], "finite"),
    Case("costs-nan", [*K, *P4M8, "--costs", "F=nan"], "finite"),
    Case("costs-negative", [*K, *P4M8, "--costs", "F=-1"], "non-negative"),
    Case("costs-sum-overflows", [*K, *P4M8, "--costs", "F=1e300,B=1e300"], "limit of 1e+12"),
    Case("costs-unknown-key", [*K, *P4M8, "--costs", "X=1"], "KEY one of"),
    Case("costs-no-value", [*K, *P4M8, "--costs", "F"], "KEY=VALUE"),
    Case("costs-word", [*K, *P4M8, "--costs", "F=fast"], "cost must be a number"),
    Case("costs-twice", [*K, *P4M8, "--costs", "F=1,F=2"], "gives F twice"),
    Case("costs-only-commas", [*K, *P4M8, "--costs", " , ,"], "names no cost"),
    # given empty (an unset shell variable), --rules once meant no rule without a word
    Case("rules-empty", [*K, *P4M8, "--rules", ""], "names no rule"),
    Case("rules-blank", [*K, *P4M8, "--rules", "  "], "leave --rules out"),
    Case("costs-5000-digits", [*K, *P4M8, "--costs", "F=" + BIG], "finite"),
    # kind / class choice
    Case("kind-unknown", ["--kind", "pipedream", *P4M8], "invalid choice"),
    Case("kind-5000-chars", ["--kind", "x" * 5000, *P4M8], "invalid choice"),
    Case("kind-missing", P4M8, "--kind is required"),
    Case("kind-and-from", [*K, "--from", "sched_ok:Sched", *P4M8], "either --kind or --from"),
    Case("model-unknown", [*K, *P4M8, "--model", "telepathy"], "invalid choice"),
    Case("stages-missing", [*K, "--microbatches", "8"], "--stages and --microbatches are required"),
    Case("unknown-option", [*K, *P4M8, "--stagez", "4"], "unrecognized arguments"),
    Case("timeout-nan", _from("sched_ok", "--timeout", "nan"), "timeout must be a finite number"),
    Case("timeout-negative", _from("sched_ok", "--timeout", "-1"), "timeout must be more than 0"),
    Case("timeout-inf", _from("sched_ok", "--timeout", "inf"), "timeout must be a finite number"),
    # --from: the reference, the module, the class and what its steps() yield
    Case("from-no-colon", ["--from", "sched_ok", *P4M8], "expected MODULE:"),
    Case("from-empty-module", ["--from", ":Sched", *P4M8], "expected MODULE:"),
    Case("from-empty-class", ["--from", "sched_ok:", *P4M8], "expected MODULE:"),
    Case("from-bad-module-name", ["--from", "a b:Sched", *P4M8], "is not a module name"),
    Case("from-5000-chars", ["--from", "m" * 5000 + ":Sched", *P4M8], "characters", **CHILD),
    Case(
        "from-missing-module",
        ["--from", "no_such_module:X", *P4M8],
        "cannot import module",
        **CHILD,
    ),
    Case("from-import-raises", _from("import_raises"), "broken at import", **CHILD),
    Case("from-import-exit", _from("import_exit"), "SystemExit", **CHILD),
    Case("from-import-keyboard", _from("import_keyboard"), "KeyboardInterrupt", **CHILD),
    Case("from-syntax-error", _from("syntax_error"), "syntax error", **CHILD),
    Case(
        "from-missing-class", ["--from", "sched_ok:Nope", *P4M8], "has no attribute 'Nope'", **CHILD
    ),
    Case("from-not-a-class", _from("not_a_class"), "is not a pipeline schedule class", **CHILD),
    Case(
        "from-json-dumps",
        ["--from", "json:dumps", *P4M8],
        "is not a pipeline schedule class",
        **CHILD,
    ),
    Case("from-buffer-abc", _from("sched_buf_abc"), "buffer ids are whole numbers", **CHILD),
    Case("from-buffer-nan", _from("sched_buf_nan"), "buffer ids are whole numbers", **CHILD),
    Case("from-buffer-10e30", _from("sched_buf_huge"), "outside 0..0", **CHILD),
    Case("from-buffer-float", _from("sched_buf_float"), "buffer ids are whole numbers", **CHILD),
    Case("from-buffer-beyond", _from("sched_buf_beyond"), "outside 0..0", **CHILD),
    Case("from-buffer-negative", _from("sched_buf_negative"), "outside 0..0", **CHILD),
    Case(
        "from-num-buffers-negative",
        _from("sched_nbuf_negative"),
        "num_pipe_buffers() returned '-1'",
        **CHILD,
    ),
    Case("from-num-buffers-zero", _from("sched_nbuf_zero"), "between 1 and", **CHILD),
    Case("from-num-buffers-str", _from("sched_nbuf_str"), "whole number of buffers", **CHILD),
    Case("from-num-buffers-nan", _from("sched_nbuf_nan"), "whole number of buffers", **CHILD),
    Case("from-num-buffers-huge", _from("sched_nbuf_huge"), "between 1 and", **CHILD),
    Case("from-num-buffers-raises", _from("sched_nbuf_raises"), "ZeroDivisionError", **CHILD),
    Case("from-infinite-steps", _from("sched_infinite"), "endless generator", **CHILD),
    Case("from-infinite-empty-steps", _from("sched_infinite_empty"), "endless generator", **CHILD),
    Case("from-infinite-step", _from("sched_infinite_step"), "endless generator", **CHILD),
    Case("from-yields-nothing", _from("sched_yields_nothing"), "holds no compute action", **CHILD),
    Case("from-no-steps", _from("sched_no_steps"), "holds no compute action", **CHILD),
    Case("from-sys-exit", _from("sched_exit"), "SystemExit", **CHILD),
    Case("from-os-exit", _from("sched_os_exit"), "exit code 3", **CHILD),
    Case("from-keyboard-interrupt", _from("sched_keyboard"), "KeyboardInterrupt", **CHILD),
    Case("from-segfault", _from("sched_segfault"), "SIGSEGV", **CHILD),
    Case(
        "from-sleeps", _from("sched_sleeps", "--timeout", "2"), "did not finish within 2 s", **CHILD
    ),
    Case("from-raises", _from("sched_raises"), "bad schedule", **CHILD),
    Case("from-steps-not-iterable", _from("sched_not_iterable"), "TypeError", **CHILD),
    Case("from-step-not-iterable", _from("sched_step_not_iterable"), "TypeError", **CHILD),
    Case(
        "from-unknown-instruction",
        _from("sched_unknown_instr"),
        "unknown instruction 'Wobble'",
        **CHILD,
    ),
    Case("from-init-raises", _from("sched_init_raises"), "no such stage", **CHILD),
    Case("from-long-message", _from("sched_long_message"), "characters", **CHILD),
    Case("from-multiline-message", _from("sched_newlines"), "line one line two", **CHILD),
    # --from FILE.csv: its numbers are held to the limits of --stages and --microbatches
    Case("csv-mb-beyond-int64", ["--from", "{d}/mb_beyond_int64.csv"], "limit of 65,536 micro"),
    Case("csv-mb-10-million", ["--from", "{d}/mb_10_million.csv"], "limit of 65,536 micro"),
    Case("csv-mb-5000-digits", ["--from", "{d}/mb_5000_digits.csv"], "limit of 65,536 micro"),
    Case("csv-stage-10-million", ["--from", "{d}/stage_10_million.csv"], "limit of 1,024 stages"),
    Case(
        "csv-comms-stage-10-million",
        ["--from", "{d}/comms_stage_10_million.csv"],
        "limit of 1,024 stages",
    ),
    Case(
        "csv-cells-over-limit",
        ["--from", "{d}/cells_over_limit.csv"],
        "more than the limit of 1,048,576",
    ),
    Case(
        "csv-missing-stages-counted",
        ["--from", "{d}/stages_missing.csv"],
        "999 of the 1,001 stages never compute in this order (stages 1, 2, 3, 4 and 995 more)",
    ),
    *(
        Case(
            f"explorer-csv-{column}-edited",
            ["--from", f"{{d}}/explorer_{column}_edited.csv"],
            f"the {column} column says {value} but the instruction",
        )
        for column, value in (("microbatch", "'5'"), ("kind", "'ForwardPass'"), ("stage", "'1'"))
    ),
    Case(
        "from-size-over-limit",
        _from("sched_ok", stages="1000", microbatches="20000"),
        "more than the limit",
    ),
]
