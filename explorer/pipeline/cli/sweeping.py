"""The ``--sweep`` options of ``check`` and ``fix``, and turning them into a sweep on every core."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from explorer import cli_options
from explorer.errors import InputError
from explorer.pipeline.analysis.rules import Rule
from explorer.pipeline.analysis.sizes import SizeSweep, parse_sizes
from explorer.pipeline.cli.schedule_options import (
    from_csv,
    p2p_conventions,
    parse_buffers,
    refuse_generator_options,
    rules_from_args,
)
from explorer.pipeline.schedules import KINDS


def add_sweep_options(parser: argparse.ArgumentParser, required: bool = False) -> None:
    g = parser.add_argument_group("every size at once")
    g.add_argument(
        "--sweep",
        default=None,
        required=required,
        metavar="STAGES:MICROBATCHES",
        help="check every size of a range, e.g. 2-32:1-128 or 4,8,16:1-64 (replaces --stages/--microbatches)",
    )
    g.add_argument(
        "--workers",
        default=None,
        metavar="N",
        type=cli_options.count("--workers", hi=256, label="workers", why="one per core is enough"),
        help="processes to check sizes in (default: one per core)",
    )


def refuse_workers_without_sweep(args: argparse.Namespace) -> None:
    """``--workers`` sets how many processes a sweep checks its sizes in; one size is checked in
    this process. Given without ``--sweep`` it was ignored without a word, and a user read the
    single check as if it had been spread over the workers asked for."""
    if getattr(args, "workers", None) is not None and not getattr(args, "sweep", None):
        raise InputError(
            f"--workers {args.workers} sets the processes of a sweep; one size is checked in "
            "this process: add --sweep STAGES:MICROBATCHES, or drop --workers"
        )


def job_from_args(args: argparse.Namespace, rules: Sequence[Rule] = ()) -> dict:
    """What a worker needs to build the schedule at any size."""
    if args.from_class and args.kind:
        raise InputError("give either --kind or --from, not both")
    if not args.from_class and not args.kind:
        raise InputError(
            f"--kind is required (one of {', '.join(KINDS)}) unless --from names a schedule class"
        )
    _refuse_single_size_options(args)
    if args.from_class and not from_csv(args):
        refuse_generator_options(args)
    if from_csv(args):
        raise InputError(
            f"--sweep needs a schedule that can be built at every size; {args.from_class} is one "
            "schedule of one size (check it without --sweep, or give --kind or a class)"
        )
    return {
        "kind": args.kind,
        "from": args.from_class,
        "chunks": args.chunks,
        "buffers": parse_buffers(args.buffers),
        "order": args.order,
        "rules": [r.name for r in rules],
        # Asked at every size exactly as the single check asks: one verdict, one definition.
        "model": getattr(args, "model", None),
        "communicators": getattr(args, "communicators", "eager"),
        "conventions": p2p_conventions(args),
    }


def _refuse_single_size_options(args: argparse.Namespace) -> None:
    """Options that shape one size's report say nothing to a sweep: refused, not ignored, so a
    user never reads a sweep's verdict as if it had used them."""
    if getattr(args, "costs", ""):
        raise InputError(
            "--costs sets one schedule's simulated timeline; a sweep's verdicts do not use it: "
            "drop --costs, or check one size without --sweep"
        )
    if getattr(args, "stage", None) is not None:
        raise InputError(
            "--stage shows one stage of one schedule; a sweep checks every size: drop --stage"
        )


def sizes_from_args(args: argparse.Namespace) -> tuple[list[int], list[int], str]:
    if args.stages is not None or args.microbatches is not None:
        raise InputError("--sweep gives the sizes: leave out --stages and --microbatches")
    stages, mbs = parse_sizes(args.sweep)
    return stages, mbs, args.sweep.replace(" ", "")


def sweep_from_args(args: argparse.Namespace, rules: Sequence[Rule] | None = None) -> SizeSweep:
    """The sweep ``check --sweep`` prints (``--rules`` applied), with a progress bar on a terminal."""
    stages, mbs, spec = sizes_from_args(args)
    chosen = rules_from_args(args) if rules is None else rules
    return run_sweep(job_from_args(args, chosen), stages, mbs, spec, args)


def run_sweep(
    job: dict,
    stages: Sequence[int],
    mbs: Sequence[int],
    spec: str,
    args: argparse.Namespace,
    label: str = "",
) -> SizeSweep:
    from explorer.pipeline.runtime.sweep_pool import (  # only a sweep
        default_workers,
        sweep_in_workers,
    )
    # needs worker processes: a plain ``explorer check`` imports none of their machinery

    bar = _bar(label) if sys.stderr.isatty() else None
    sweep = sweep_in_workers(
        job,
        stages,
        mbs,
        spec=spec,
        workers=args.workers or default_workers(),
        timeout_s=args.timeout,
        progress=bar,
    )
    if bar is not None:
        sys.stderr.write("\r" + " " * 70 + "\r")
    return sweep


def run_rule_sets(
    job: dict,
    rule_sets: Sequence[Sequence[str]],
    stages: Sequence[int],
    mbs: Sequence[int],
    spec: str,
    args: argparse.Namespace,
) -> list[SizeSweep]:
    """One sweep per set of rule names, all in one pass over the sizes (``explorer fix``)."""
    from explorer.pipeline.runtime.sweep_pool import default_workers, sweep_rule_sets_in_workers

    bar = _bar(f"{len(rule_sets)} rule sets: ") if sys.stderr.isatty() else None
    sweeps = sweep_rule_sets_in_workers(
        job,
        rule_sets,
        stages,
        mbs,
        spec=spec,
        workers=args.workers or default_workers(),
        timeout_s=args.timeout,
        progress=bar,
    )
    if bar is not None:
        sys.stderr.write("\r" + " " * 70 + "\r")
    return sweeps


def _bar(label: str):
    def show(done: int, total: int) -> None:
        width = 30
        filled = int(width * done / max(total, 1))
        sys.stderr.write(
            f"\r{label}[{'#' * filled}{'.' * (width - filled)}] {done:,}/{total:,} sizes"
        )
        sys.stderr.flush()

    return show


__all__ = ["add_sweep_options", "job_from_args", "sizes_from_args", "sweep_from_args", "run_sweep"]
