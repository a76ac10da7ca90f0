"""Options shared by the schedule commands (``schedule``, ``check``), and turning them into a report."""

from __future__ import annotations

import argparse
from typing import Optional

from explorer.analysis import Costs, Report, build, check
from explorer.errors import InputError
from explorer.schedules import KINDS
from explorer.schedules.adapters import from_deepspeed, load_class
from explorer.schedules.schedule import Schedule

COST_KEYS = {"F": "forward", "B": "backward", "I": "backward_input", "W": "backward_weight",
             "p2p": "p2p", "send": "send", "recv": "recv", "L": "load", "R": "reduce", "O": "optimizer"}


def add_schedule_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("schedule")
    g.add_argument("--kind", choices=list(KINDS), help="schedule generator")
    g.add_argument("--from", dest="from_class", metavar="MODULE:CLASS",
                   help="a DeepSpeed-style PipeSchedule class on PYTHONPATH instead of --kind")
    g.add_argument("--stages", type=int, required=True, metavar="P",
                   help="pipeline ranks; interleaved-1f1b runs P x --chunks stages and dualpipev 2P")
    g.add_argument("--microbatches", type=int, required=True, metavar="M", help="micro-batches per batch")
    g.add_argument("--chunks", type=int, default=1, metavar="V", help="virtual stages per rank (interleaved-1f1b)")
    g.add_argument("--buffers", default=None, metavar="N|legacy|fixed|minimal",
                   help="buffers per stage: a number, a comma list, DeepSpeed's legacy/fixed formula, or minimal")
    g.add_argument("--order", choices=["legacy", "fixed"], default=None,
                   help="DeepSpeed send/recv order inside a step (deepspeed-train)")
    g.add_argument("--stage", type=int, default=None, metavar="S", help="show only the rank that runs stage S")
    a = parser.add_argument_group("analysis")
    a.add_argument("--model", choices=["blocking", "batched"], default=None,
                   help="P2P model for deadlocks and timing (default: the schedule's own)")
    a.add_argument("--costs", default="", metavar="F=1,B=2,...",
                   help="per-instruction costs: F, B, I, W, send, recv (time inside the call), p2p (latency), "
                        "L, R, O (default F=1,B=2,I=1,W=1, the rest 0)")


def parse_buffers(text: Optional[str]):
    if text is None or text in ("legacy", "fixed", "minimal"):
        return text
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        raise InputError(f"--buffers {text!r}: use a number, a comma-separated list, legacy, fixed or minimal") from None
    return values[0] if len(values) == 1 else values


def parse_costs(text: str) -> Costs:
    values: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or key not in COST_KEYS:
            raise InputError(f"--costs item {part!r}: write KEY=VALUE with KEY one of {', '.join(COST_KEYS)}")
        try:
            values[COST_KEYS[key]] = float(value)
        except ValueError:
            raise InputError(f"--costs item {part!r}: {value!r} is not a number") from None
    return Costs(**values)


def schedule_from_args(args: argparse.Namespace) -> Schedule:
    if args.from_class:
        if args.kind:
            raise InputError("give either --kind or --from, not both")
        return from_deepspeed(load_class(args.from_class), args.stages, args.microbatches)
    if not args.kind:
        raise InputError(f"--kind is required (one of {', '.join(KINDS)}) unless --from names a schedule class")
    return build(args.kind, args.stages, args.microbatches, chunks=args.chunks,
                 buffers=parse_buffers(args.buffers), order=args.order)


def report_from_args(args: argparse.Namespace) -> Report:
    schedule = schedule_from_args(args)
    if args.stage is not None and not 0 <= args.stage < schedule.num_stages:
        raise InputError(f"--stage {args.stage} is outside stages 0..{schedule.num_stages - 1}")
    return check(schedule, parse_costs(args.costs), args.model)


def selected_ranks(args: argparse.Namespace, report: Report) -> Optional[list[int]]:
    return None if args.stage is None else [report.schedule.stage_to_rank[args.stage]]


def emit(text: str, out: Optional[str]) -> None:
    if out:
        with open(out, "w", encoding="utf-8") as fh:
            fh.write(text)
    else:
        print(text, end="" if text.endswith("\n") else "\n")
