"""``explorer compile-probe``: run a training loop under torch.compile and name the period's cause.

``--scenario NAME`` runs a preset; ``--step MODULE:FUNCTION`` runs the user's own
``step(iteration)``. ``--json`` prints the record document (issue 7's shape); otherwise a
short report. Exit 0 when nothing periodic or recompiling was found, 1 for findings
(a period, recompiles after warm-up, eager fallback, or a step that raised), 2 for bad input.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any

from explorer import cli_options, inputs
from explorer.compile.printout import probe_report
from explorer.compile.runtime.scenarios import PRESETS
from explorer.errors import InputError, excerpt


def register(subparsers: Any) -> None:
    """Add the ``compile-probe`` sub-command."""
    p = subparsers.add_parser(
        "compile-probe",
        help="run a loop under torch.compile: compiles, guard failures, variants, period and cause",
        description=__doc__.splitlines()[0],
    )
    cli_options.add_scenario_or_step(
        p,
        PRESETS,
        preset="a preset loop",
        step="your own step(iteration) function (run in a child process, see --timeout)",
    )
    p.add_argument(
        "--iterations",
        default=None,
        help="iterations to run (default: the preset's)",
        type=cli_options.count(
            "--iterations",
            hi=MAX_ITERATIONS,
            label="iterations",
            why="each iteration is a real, timed step; a period shows within a few dozen",
        ),
    )
    p.add_argument(
        "--nproc",
        default=1,
        type=cli_options.count(
            "--nproc", hi=MAX_NPROC, label="nproc", why="each rank is a process on this machine"
        ),
        help="ranks to run, each in its own process on a gloo group (default 1); the report merges them",
    )
    p.add_argument(
        "--timeout",
        default=900.0,
        metavar="S",
        type=cli_options.seconds("--timeout", "a day"),
        help="seconds a --step run may take before its child process is stopped (default 900)",
    )
    p.add_argument(
        "--backend",
        default=None,
        type=_backend_name,
        help="registered name or dotted path (default: inductor if a C++ compiler exists, else aot_eager)",
    )
    p.add_argument(
        "--config", default=None, help="a DeepSpeed-style JSON file with a 'compile' section"
    )
    p.add_argument(
        "--source",
        choices=("auto", "metrics", "log"),
        default="auto",
        help="where compile events are read from",
    )
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=run)


#: Most iterations one probe runs.
MAX_ITERATIONS = 10_000
#: Most ranks ``--nproc`` starts on one machine.
MAX_NPROC = 64
#: Largest --config read (a DeepSpeed config is a few KB).
MAX_CONFIG_BYTES = 16 * 2**20
#: Set in the child that runs a --step, so it does not start a child of its own.
CHILD_ENV = "EXPLORER_COMPILE_PROBE_CHILD"
#: The child's last stderr line once it has printed its verdict: an exit code without it (a
#: step's ``sys.exit(0)``) is the step's ending, not the probe's.
DONE = "explorer compile-probe: verdict printed, exit"


def _backend_name(text: str) -> str:
    """A registered backend name or a dotted path (an argparse type; resolved later, with torch)."""
    if not text.strip() or not all(part.isidentifier() for part in text.strip().split(".")):
        raise argparse.ArgumentTypeError(
            f"{excerpt(text)} is not a backend: give a registered name such as inductor "
            "or aot_eager, or the dotted path of a backend function, my_pkg.my_backend"
        )
    return text.strip()


def _load_config(path: str | None) -> dict[str, Any]:
    """The --config file: a regular UTF-8 file holding one strict JSON object (no NaN, not deeply nested)."""
    if not path:
        return {}
    config = inputs.read_json(path, "--config", MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise InputError(
            f"--config {excerpt(path)} holds a JSON {type(config).__name__}: it must be an object such "
            'as {"compile": {"backend": "inductor"}}'
        )
    return config


def run(args: argparse.Namespace) -> int:
    """Probe, print, and return 0 (nothing found), 1 (findings) or 2 (bad input, via InputError).

    In the child of :func:`_run_in_child` the end is told to the parent with the word it was
    handed (:data:`CHILD_ENV`), taken out of the environment before the user's step is imported:
    a step that wrote our end line itself and ended its process once read as a clean run
    (exit 0), or as bad input (exit 2)."""
    word = os.environ.pop(CHILD_ENV, "")
    try:
        code = _probe(args, child=bool(word))
    except InputError:
        _tell_parent(word, 2)
        raise
    _tell_parent(word, code)
    return code


def _tell_parent(word: str, code: int) -> None:
    """In the child: the parent's word and the exit code, once our own answer is out."""
    if word:
        sys.stdout.flush()
        print(f"{DONE} {word} {code}", file=sys.stderr, flush=True)


def _probe(args: argparse.Namespace, child: bool) -> int:
    if args.step and (args.backend or args.config):
        raise InputError("--backend/--config apply to --scenario; a --step compiles its own model")
    if os.environ.get("TORCH_TRACE") == "":  # torch would fail at the first compile, opening ''
        raise InputError(
            "TORCH_TRACE is set but empty: unset it, or set it to the folder torch should write "
            "its structured trace to"
        )
    if os.environ.get("TORCH_TRACE"):  # a file, /dev/null or /proc/x: torch failed in the step
        inputs.check_output_dir(os.environ["TORCH_TRACE"], "TORCH_TRACE")
    config = _load_config(args.config)
    if args.nproc > 1:
        return _print(_run_ranks(args, config), args)
    if args.step and not child:
        return _run_in_child(args)
    from explorer.compile.runtime.config import parse_config
    from explorer.user_step import load_step

    # What the user's code prints goes to stderr: standard output is the probe's answer, and a
    # step's print before the document once made --json's output no JSON at all.
    with contextlib.redirect_stdout(sys.stderr):
        step = (
            load_step(args.step) if args.step else None
        )  # a bad --step is refused before torch is imported
        parse_config(config.get("compile", config) if config else None)
        from explorer.compile.runtime.run import run_scenario, run_step

        if step is None:  # --scenario and --step are a required pair of alternatives
            result = run_scenario(args.scenario, args.iterations, args.backend, config, args.source)
        else:
            result = run_step(step, args.iterations or 20, args.source, label=args.step)
    return _print(result, args)


def _run_ranks(args: argparse.Namespace, config: dict[str, Any]) -> Any:
    """``--nproc N``: N ranks on a gloo group, each probing, merged into one result (see runtime.compile.launch)."""
    if args.scenario:
        from explorer.compile.runtime.config import parse_config

        parse_config(config.get("compile", config) if config else None)
    from explorer.compile.runtime.launch import run_ranks

    spec = {
        "scenario": args.scenario,
        "step": args.step,
        "iterations": args.iterations,
        "backend": args.backend,
        "config": config,
        "source": args.source,
    }
    return run_ranks(args.nproc, spec, args.timeout, label=args.scenario or args.step)


def _print(result: Any, args: argparse.Namespace) -> int:
    """Print the report or the JSON document; 0 nothing found, 1 findings or a failed step."""
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(probe_report(result))
    if result.error:
        print(f"explorer compile-probe: the step failed at {result.error}", file=sys.stderr)
    return result.exit_code


def _run_in_child(args: argparse.Namespace) -> int:
    """Run this same command in a child with ``--timeout``: a step's sys.exit, segfault or hang is a failure, not ours.

    The child's own endings (0, 1, 2) pass through with its output; any other ending is one line
    on stderr (and, with ``--json``, a document with ``"ok": false`` and the failure), exit 1:
    the input was valid, the user's code failed.
    """
    from explorer.processes.isolate import run_child

    word = os.urandom(16).hex()  # the step never sees it (see run)
    env = {**os.environ, CHILD_ENV: word}
    outcome = run_child([sys.executable, "-m", "explorer.cli", *args.argv], args.timeout, env=env)
    lines = outcome.stderr.splitlines()
    errors = [line for line in lines if line.startswith("explorer compile-probe: error:")]
    ours = outcome.returncode in (0, 1, 2) and f"{DONE} {word} {outcome.returncode}" in lines
    ours = ours and (outcome.returncode != 2 or bool(errors))  # bad input names itself too
    if ours and not outcome.timed_out:
        sys.stdout.write(outcome.stdout)
        # bad input: its one line only (torch may have printed warnings before it)
        rest = "\n".join(line for line in lines if not line.startswith(DONE))
        sys.stderr.write(
            errors[-1] + "\n" if outcome.returncode == 2 else rest + ("\n" if rest else "")
        )
        return outcome.returncode
    message = outcome.ending(f"the step {args.step}", args.timeout)
    if args.json:
        from explorer.failure import Failure, FailureKind

        failure = Failure(
            FailureKind.TIMEOUT
            if outcome.timed_out
            else FailureKind.ABORT
            if outcome.signal
            else FailureKind.EXIT,
            message,
            returncode=outcome.returncode,
            signal=outcome.signal,
        )
        doc = {
            "kind": "compile",  # the same document kind as a probe that ran through
            "label": args.step,
            "ok": False,
            "failure": failure.to_dict(),
            "seconds": round(outcome.seconds, 3),
        }
        print(json.dumps(doc, indent=1))
    print(f"explorer compile-probe: the step failed: {message}", file=sys.stderr)
    return 1


__all__ = ["register", "MAX_ITERATIONS", "MAX_NPROC", "MAX_CONFIG_BYTES", "CHILD_ENV", "run"]
