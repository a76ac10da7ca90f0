"""``explorer fix``: search rewrite rules that remove every finding at every size, and prove them.

Same schedule options as ``check``; ``--sweep`` gives the sizes to prove over. Prints each
proven candidate as its rules in words, a ``-``/``+`` listing of one stage at the smallest
failing size and its proof; then the rejected combinations with the size and finding that
rejected them. Exit 0 when a proven fix exists (or nothing needed fixing), 1 when none, 2 on
bad input. Re-check or run a candidate with ``--rules`` on ``check``, ``schedule`` or ``run``.
"""

from __future__ import annotations

import argparse
import json
from typing import Sequence

from explorer import cli_options
from explorer.pipeline.analysis.repair import rule_combinations, search_fixes
from explorer.pipeline.analysis.rules import RULES, Rule
from explorer.pipeline.analysis.sizes import SizeSweep
from explorer.pipeline.cli.schedule_options import add_schedule_options, emit, rules_from_args
from explorer.pipeline.cli.sweeping import (
    add_sweep_options,
    job_from_args,
    run_rule_sets,
    sizes_from_args,
)
from explorer.verdict import with_verdict


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "fix",
        help="search rewrite rules that make a schedule clean at every size, and prove them",
        description=__doc__.splitlines()[0],
    )
    add_schedule_options(p)
    add_sweep_options(p, required=True)
    p.add_argument(
        "--max-rules",
        type=cli_options.count(
            "--max-rules", hi=len(RULES), label="rules", why="there are no more rules to combine"
        ),
        default=2,
        metavar="K",
        help="combine up to K rules (default 2)",
    )
    p.add_argument("--json", action="store_true", help="print the search as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    stages, mbs, spec = sizes_from_args(args)
    base_rules = rules_from_args(args)
    job = job_from_args(args, base_rules)  # --kind/--from checked before any work
    # The baseline and every combination in one pass over the sizes: each size is built once
    # (a --from class imported once per worker) and every combination applied to it.
    sets = [(), *rule_combinations(max_rules=args.max_rules)]
    sweeps = run_rule_sets(job, [[r.name for r in c] for c in sets], stages, mbs, spec, args)
    swept = {tuple(r.name for r in c): s for c, s in zip(sets, sweeps)}

    def sweep(rules: Sequence[Rule], p: Sequence[int], m: Sequence[int], spec: str) -> SizeSweep:
        return swept[tuple(r.name for r in rules)]

    from explorer.pipeline.runtime.sweep_pool import build_from_job

    make = _parent_make(args, base_rules, build_from_job)
    result = search_fixes(make, stages, mbs, max_rules=args.max_rules, spec=spec, sweep=sweep)
    code = 0 if result.candidates or result.baseline.smallest_failing is None else 1
    doc = with_verdict(result.to_dict(), code) if args.json else {}
    emit(json.dumps(doc, indent=1) + "\n" if args.json else result.describe() + "\n", None)
    return code


def _parent_make(args: argparse.Namespace, base_rules: Sequence[Rule], build_from_job):
    """Builds single sizes for the listing and the reference size; a ``--from`` class only in a child."""
    if not args.from_class:
        return build_from_job(job_from_args(args, base_rules))
    from explorer.pipeline.analysis.rules import apply_rules
    from explorer.pipeline.runtime.user_schedule import schedule_from_class

    return lambda p, m: apply_rules(
        schedule_from_class(args.from_class, p, m, args.timeout), base_rules
    )


__all__ = ["register", "run"]
