"""``explorer compile-probe``: run a training loop under torch.compile and name the period's cause.

``--scenario NAME`` runs a preset; ``--step MODULE:FUNCTION`` runs the user's own
``step(iteration)``. ``--json`` prints the record document (issue 7's shape); otherwise a
short report. Exit 0 when nothing periodic or recompiling was found, 1 for findings
(a period, recompiles after warm-up, eager fallback, or a step that raised), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from explorer.errors import InputError
from explorer.runtime.compile.scenarios import PRESETS


def register(subparsers: Any) -> None:
    """Add the ``compile-probe`` sub-command."""
    p = subparsers.add_parser(
        "compile-probe",
        help="run a loop under torch.compile: compiles, guard failures, variants, period and cause",
        description=__doc__.splitlines()[0],
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--scenario", choices=list(PRESETS), help="a preset loop")
    what.add_argument("--step", metavar="MODULE:FUNCTION", help="your own step(iteration) function")
    p.add_argument("--iterations", type=int, default=None, help="iterations to run (default: the preset's)")
    p.add_argument("--backend", default=None, help="registered name or dotted path (default: inductor if a C++ compiler exists, else aot_eager)")
    p.add_argument("--config", default=None, help="a DeepSpeed-style JSON file with a 'compile' section")
    p.add_argument("--source", choices=("auto", "metrics", "log"), default="auto", help="where compile events are read from")
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=run)


def _load_config(path: str | None) -> dict[str, Any]:
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise InputError(f"--config {path!r}: cannot read it ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"--config {path!r}: not JSON (line {exc.lineno}: {exc.msg})") from exc


def run(args: argparse.Namespace) -> int:
    """Probe, print, and return 0 (nothing found), 1 (findings) or 2 (bad input, via InputError)."""
    if args.iterations is not None and args.iterations < 1:
        raise InputError(f"--iterations must be at least 1, got {args.iterations}")
    from explorer.runtime.compile.config import parse_config
    from explorer.runtime.compile.run import run_scenario, run_step
    from explorer.runtime.compile.user_step import load_step

    config = _load_config(args.config)
    parse_config(config.get("compile", config) if config else None)
    if args.scenario:
        result = run_scenario(args.scenario, args.iterations, args.backend, config, args.source)
    else:
        if args.backend or args.config:
            raise InputError("--backend/--config apply to --scenario; a --step compiles its own model")
        result = run_step(load_step(args.step), args.iterations or 20, args.source, label=args.step)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
    else:
        print(_report(result))
    if result.error:
        print(f"explorer compile-probe: the step failed at {result.error}", file=sys.stderr)
        return 1
    return 0 if result.diagnosis is None or result.diagnosis.cause == "steady" else 1


def _report(result: Any) -> str:
    lines = [f"{result.label}: backend {result.backend or '(the step’s own)'}, records from Dynamo {result.source}"]
    lines.append(" it      ms  compiled  variant")
    for it in result.iterations:
        flag = " fallback" if it.fallback else ""
        lines.append(f"{it.iteration:3d} {it.ms:9.2f}  {'yes' if it.compiled else '   '}       {it.variant or '-'}{flag}")
    for c in result.compiles:
        why = c.guard or ("first compile" if not c.failed else "")
        lines.append(f"compile {c.compile_id} at iteration {c.iteration} ({c.function or '?'}): {c.failed or ''}{why}")
    for g in result.graph_breaks:
        lines.append(f"graph break {g.compile_id or ''} at iteration {g.iteration}: {g.reason}")
    if result.diagnosis:
        lines.append(result.diagnosis.sentence)
    return "\n".join(lines)
