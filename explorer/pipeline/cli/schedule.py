"""``explorer schedule``: list a schedule per rank with its findings marked, or export it (``html``:
the figures too, self-contained)."""

from __future__ import annotations

import argparse
import json

from explorer import cli_options
from explorer.errors import InputError
from explorer.pipeline.cli.schedule_options import (
    add_schedule_options,
    emit,
    report_from_args,
    selected_ranks,
)
from explorer.pipeline.printout.html import schedule_page
from explorer.pipeline.printout.listing import listing
from explorer.pipeline.schedules import io


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "schedule",
        help="list a pipeline schedule (text, json, csv, html)",
        description="List a schedule one step per line, findings marked on their line.",
    )
    add_schedule_options(p)
    p.add_argument("--format", choices=["text", "json", "csv", "html"], default="text")
    p.add_argument(
        "--out",
        metavar="FILE",
        type=cli_options.output_file("--out"),
        help="write to FILE instead of stdout (checked before any work)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = report_from_args(args)
    if args.stage is not None and args.format != "text":
        raise InputError(
            f"--stage shows one rank in --format text; --format {args.format} holds the whole "
            "schedule: drop --stage"
        )
    if args.format == "text":
        emit(listing(report, selected_ranks(args, report)), args.out)
    elif args.format == "json":
        emit(json.dumps(io.to_json(report.schedule), indent=1) + "\n", args.out)
    elif args.format == "csv":
        emit(io.to_csv(report.schedule), args.out)
    else:
        emit(schedule_page(report, _figure_divs(report)), args.out)
    return 0


def _figure_divs(report) -> list[tuple[str, str]]:
    """The views' figures as ``<div>``s, plotly.js inlined in the first only (offline, once).
    Imported here, not at the top: plotly costs start-up time the other formats do not need."""
    from explorer.pipeline.views.schedule_figures import schedule_figures
    from explorer.ui.html import figure_div

    headings = {
        "grid": "Grid: what each stage does at each step",
        "timeline": "Timeline (simulated costs)",
        "lifetimes": "Buffer lifetimes",
        "memory": "Memory per rank over time",
    }
    return [
        (headings[name], figure_div(fig, include_plotlyjs=i == 0))
        for i, (name, fig) in enumerate(schedule_figures(report).items())
    ]


__all__ = ["register", "run"]
