"""``explorer check``: verdict on a schedule; exit 0 valid, 1 findings, 2 bad input.

With ``--sweep STAGES:MICROBATCHES`` it checks every size of the range on every core and
names the smallest failing size (:mod:`explorer.analysis.sizes`).
"""

from __future__ import annotations

import argparse
import json

from explorer.analysis.torch_words import cycle_words
from explorer.commands.schedule_options import add_schedule_options, emit, report_from_args
from explorer.commands.sweeping import add_sweep_options, sweep_from_args
from explorer.report.listing import summary


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "check",
        help="check a schedule for hazards, unmatched P2P and deadlocks",
        description="Check a schedule. Exit 0 when valid, 1 with findings, 2 on bad input.",
    )
    add_schedule_options(p)
    add_sweep_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.sweep:
        sweep = sweep_from_args(args)
        emit(
            json.dumps(sweep.to_dict(), indent=1) + "\n" if args.json else sweep.describe() + "\n",
            None,
        )
        return 130 if sweep.interrupted else (0 if sweep.smallest_failing is None else 1)
    report = report_from_args(args)
    words = cycle_words(report.schedule, report.findings.deadlock, report.matching.partner)
    if args.json:
        doc = report.to_dict()
        if words:
            doc["deadlock_in_pytorch_words"] = words
        emit(json.dumps(doc, indent=1) + "\n", None)
    else:
        emit(summary(report) + (f"\n{words}" if words else "") + "\n", None)
    return 0 if report.ok else 1
