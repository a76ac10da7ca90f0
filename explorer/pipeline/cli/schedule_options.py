"""Options shared by the schedule commands (``schedule``, ``check``), and turning them into a report."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from explorer import cli_options
from explorer.errors import InputError, excerpt
from explorer.inputs import write_text
from explorer.pipeline.analysis import Costs, Report, build, check
from explorer.pipeline.analysis.conventions import under_conventions
from explorer.pipeline.schedules import KINDS
from explorer.pipeline.schedules.schedule import Schedule

if TYPE_CHECKING:
    from explorer.pipeline.analysis.rules import Rule

#: Why the stage and micro-batch counts have an upper limit (shown with the refusal).
_SIZE_WHY = "the analyses hold every instruction in memory"

COST_KEYS = {
    "F": "forward",
    "B": "backward",
    "I": "backward_input",
    "W": "backward_weight",
    "p2p": "p2p",
    "send": "send",
    "recv": "recv",
    "L": "load",
    "R": "reduce",
    "O": "optimizer",
}


@dataclass(frozen=True)
class Limits:
    """How large a schedule a command takes, and why: each refusal says the limit and the why."""

    stages: int
    microbatches: int
    chunks: int
    stages_why: str
    microbatches_why: str
    chunks_why: str


#: ``schedule``, ``check``, ``fix``: what the analyses hold in memory.
ANALYSIS_LIMITS = Limits(
    cli_options.MAX_STAGES,
    cli_options.MAX_MICROBATCHES,
    cli_options.MAX_STAGES,
    _SIZE_WHY,
    _SIZE_WHY,
    _SIZE_WHY,
)


def add_schedule_choice(g: argparse._ActionsContainer, limits: Limits, *, csv: bool = True) -> None:
    """The options that name a schedule, declared once for every command that takes one
    (``schedule``, ``check``, ``fix``, ``run``): they differ only in ``limits`` and in whether
    ``--from`` may be a PyTorch schedule CSV (``csv``; ``run`` runs classes only)."""
    g.add_argument("--kind", choices=list(KINDS), help="schedule generator")
    g.add_argument(
        "--from",
        dest="from_class",
        metavar="MODULE:CLASS|FILE.csv" if csv else "MODULE:CLASS",
        type=_class_or_csv if csv else _class_ref,
        help="a DeepSpeed-style PipeSchedule class on PYTHONPATH instead of --kind (run in a child "
        "process)"
        + (
            ", or a PyTorch schedule CSV (_dump_csv, torchtitan's pipeline_parallel_schedule_csv)"
            if csv
            else ""
        ),
    )
    g.add_argument(
        "--stages",
        default=None,
        metavar="P",
        type=cli_options.count("--stages", hi=limits.stages, why=limits.stages_why, label="stages"),
        help="pipeline ranks; interleaved-1f1b runs P x --chunks stages and dualpipev 2P",
    )
    g.add_argument(
        "--microbatches",
        default=None,
        metavar="M",
        help="micro-batches per batch",
        type=cli_options.count(
            "--microbatches",
            hi=limits.microbatches,
            why=limits.microbatches_why,
            label="micro-batches",
        ),
    )
    g.add_argument(
        "--chunks",
        default=1,
        metavar="V",
        help="virtual stages per rank (interleaved-1f1b)",
        type=cli_options.count("--chunks", hi=limits.chunks, why=limits.chunks_why, label="chunks"),
    )
    g.add_argument(
        "--buffers",
        default=None,
        metavar="N|legacy|fixed|minimal",
        help="buffers per stage: a number, a comma list, DeepSpeed's legacy/fixed formula, or minimal",
    )
    g.add_argument(
        "--order",
        choices=["legacy", "fixed"],
        default=None,
        help="DeepSpeed send/recv order inside a step (deepspeed-train)",
    )
    g.add_argument(
        "--rules",
        default=None,
        metavar="R1,R2",
        help="rewrite rules applied to the schedule, in order (see `explorer fix`): "
        "grads-first, parity, defer-recv, buffers+1",
    )


def add_schedule_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("schedule")
    add_schedule_choice(g, ANALYSIS_LIMITS)
    g.add_argument(
        "--timeout",
        type=cli_options.seconds("--timeout", "a day"),
        default=60.0,
        metavar="S",
        help="seconds a --from class may take to yield its steps (default 60)",
    )
    g.add_argument(
        "--stage",
        default=None,
        metavar="S",
        help="show only the rank that runs stage S",
        type=cli_options.count(
            "--stage",
            lo=0,
            hi=2 * cli_options.MAX_STAGES,
            label="--stage",
            what="stage index",
            why="no schedule has more stages",
        ),
    )
    a = parser.add_argument_group("analysis")
    a.add_argument(
        "--model",
        choices=["blocking", "batched"],
        default=None,
        help="P2P model for deadlocks and timing (default: the schedule's own)",
    )
    a.add_argument(
        "--costs",
        default="",
        metavar="F=1,B=2,...",
        help="per-instruction costs: F, B, I, W, send, recv (time inside the call), p2p (latency), "
        "L, R, O (default F=1,B=2,I=1,W=1, the rest 0)",
    )


def parse_buffers(text: Optional[str]):
    """``None``, a policy name, one count or a comma list of counts, each in ``1..MAX_MICROBATCHES``."""
    if text is None or text in ("legacy", "fixed", "minimal"):
        return text
    parse = cli_options.count(
        "--buffers",
        hi=cli_options.MAX_MICROBATCHES,
        label="buffer counts",
        why="a stage never holds more micro-batches than that",
    )
    values = []
    for item in text.split(","):
        if not cli_options._INTEGER.fullmatch(item):
            raise InputError(
                f"--buffers {excerpt(text)}: use a number, a comma-separated list, legacy, fixed or "
                "minimal"
            )
        try:
            values.append(parse(item))
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"--buffers: {exc}") from None
    return values[0] if len(values) == 1 else values


def parse_costs(text: str) -> Costs:
    """``F=1,B=2,...``: every value a finite number in ``0..MAX_COST`` (so sums cannot overflow)."""
    values: dict[str, float] = {}
    parse = cli_options.number(
        "--costs", 0.0, Costs.MAX, why="sums over a schedule must stay finite", label="cost"
    )
    parts = [p for p in (p.strip() for p in text.split(",")) if p]
    if text.strip() and not parts:  # `--costs ,`: a list of nothing is a typo, as `--rules ,,` is
        raise InputError(
            f"--costs {excerpt(text)} names no cost: write KEY=VALUE items such as F=1,B=2, or "
            "leave --costs out for the defaults"
        )
    for part in parts:
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in COST_KEYS:
            raise InputError(
                f"--costs item {excerpt(part)}: write KEY=VALUE with KEY one of {', '.join(COST_KEYS)}"
            )
        if COST_KEYS[key] in values:
            raise InputError(f"--costs gives {key} twice: give each cost once")
        try:
            values[COST_KEYS[key]] = parse(value)
        except argparse.ArgumentTypeError as exc:
            reason = str(exc).replace(
                "cost must be at least 0", "cost must be non-negative (at least 0)"
            )
            raise InputError(f"--costs item {excerpt(part)}: {reason}") from None
    return Costs.of(values)


def rules_from_args(args: argparse.Namespace) -> list[Rule]:
    """``--rules``, parsed. Given but empty (``--rules ''``, an unset shell variable) it names no
    rule and is refused, as ``--rules ,`` is: the check it gave was of the bare schedule, while
    the command line read as if rules were applied. Leaving ``--rules`` out asks for none."""
    from explorer.pipeline.analysis.rules import RULES, parse_rules

    text = getattr(args, "rules", None)
    if text is not None and not text.strip():
        raise InputError(
            f"--rules {text!r} names no rule: name one or more of {', '.join(RULES)}, or leave "
            "--rules out for none"
        )
    return parse_rules(text or "")


def schedule_from_args(args: argparse.Namespace) -> Schedule:
    """The schedule the options name, with ``--rules`` applied."""
    from explorer.pipeline.analysis.rules import apply_rules

    return apply_rules(_under_conventions(args, _named_schedule(args)), rules_from_args(args))


def add_p2p_convention_options(parser: argparse.ArgumentParser) -> None:
    """Where exchanges sit and how they are grouped (explorer.pipeline.schedules.torch_p2p); check only."""
    g = parser.add_argument_group("P2P conventions (rewrite the order before the search)")
    g.add_argument(
        "--receives",
        choices=["as-given", "deferred"],
        default="as-given",
        help="deferred: each receive just before the compute that consumes it (pytorch #172668)",
    )
    g.add_argument(
        "--parity",
        action="store_true",
        help="Megatron's even/odd order: in each run of adjacent exchanges even ranks send first, odd ranks receive first",
    )
    g.add_argument(
        "--batching",
        choices=["none", "adjacent", "per-peer"],
        default="none",
        help="exchanges one batch_isend_irecv posts together: none (PyTorch's runtime), every "
        "adjacent run, or one batch per peer in peer order (_sorted_batch_p2p)",
    )
    g.add_argument(
        "--communicators",
        choices=["eager", "lazy"],
        default="eager",
        help="lazy: two-rank communicators are created at a pair's first exchange (NCCL); "
        "ranks meeting peers in different orders deadlock (Megatron-LM #5240)",
    )


def p2p_conventions(args: argparse.Namespace) -> dict:
    """The P2P conventions asked for (defaults where the command has no such option), as the
    sweep's job carries them to its workers: a sweep asks each size what the single check asks."""
    return {
        "receives": getattr(args, "receives", "as-given"),
        "parity": bool(getattr(args, "parity", False)),
        "batching": getattr(args, "batching", "none"),
    }


def _under_conventions(args: argparse.Namespace, schedule: Schedule) -> Schedule:
    return under_conventions(schedule, **p2p_conventions(args))


def require_size(args: argparse.Namespace) -> None:
    """One size is needed unless the command sweeps a range of them."""
    if args.stages is None or args.microbatches is None:
        raise InputError(
            "--stages and --microbatches are required (or, on check and fix, --sweep STAGES:MICROBATCHES)"
        )


def _class_or_csv(text: str) -> str:
    """``--from``: a ``.csv`` file is PyTorch's schedule CSV; anything else names a class."""
    if text.lower().endswith(".csv"):
        return text
    return cli_options.user_ref("--from", "my_schedules:FixBufferTrainSchedule", "MODULE:CLASS")(
        text
    )


def _class_ref(text: str) -> str:
    """``--from`` where only a class will do."""
    return cli_options.user_ref("--from", "my_schedules:FixBufferTrainSchedule", "MODULE:CLASS")(
        text
    )


def from_csv(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "from_class", None)) and args.from_class.lower().endswith(".csv")


def refuse_generator_options(args: argparse.Namespace) -> None:
    """``--from`` brings its own schedule: options that shape a ``--kind``'s are refused, not
    ignored, so no verdict reads as if they had been used (a CSV also brings its own sizes)."""
    given = [
        option
        for option, used in (
            ("--buffers", getattr(args, "buffers", None) is not None),
            ("--order", getattr(args, "order", None) is not None),
            ("--chunks", getattr(args, "chunks", 1) != 1),
        )
        if used
    ]
    if from_csv(args):
        given += [
            o
            for o, v in (("--stages", args.stages), ("--microbatches", args.microbatches))
            if v is not None
        ]
    if given:
        what = (
            "a CSV holds one schedule of one size"
            if from_csv(args)
            else "a class makes its own schedule"
        )
        raise InputError(
            f"{', '.join(given)} shape{'s' if len(given) == 1 else ''} the schedule --kind builds; "
            f"--from {excerpt(args.from_class)} is not built by them ({what}): drop "
            f"{', '.join(given)}"
        )


def _named_schedule(args: argparse.Namespace) -> Schedule:
    if args.from_class and not args.kind:
        refuse_generator_options(args)
    if from_csv(args):
        if args.kind:
            raise InputError("give either --kind or --from, not both")
        from explorer.pipeline.schedules.torch_csv import read_schedule_csv

        schedule = read_schedule_csv(args.from_class)
        if "p2p" not in schedule.params and getattr(args, "model", None) is None:
            raise InputError(  # a guess would change the verdict of the schedule that was written
                f"{excerpt(args.from_class)} is the explorer's own schedule CSV, which does not "
                "record the P2P model: give --model blocking (DeepSpeed) or --model batched (PyTorch)"
            )
        return schedule
    require_size(args)
    if args.from_class:
        if args.kind:
            raise InputError("give either --kind or --from, not both")
        cli_options.schedule_size(None, args.stages, args.microbatches)
        from explorer.pipeline.runtime.user_schedule import schedule_from_class

        return schedule_from_class(args.from_class, args.stages, args.microbatches, args.timeout)
    if not args.kind:
        raise InputError(
            f"--kind is required (one of {', '.join(KINDS)}) unless --from names a schedule class"
        )
    cli_options.schedule_size(args.kind, args.stages, args.microbatches, args.chunks)
    return build(
        args.kind,
        args.stages,
        args.microbatches,
        chunks=args.chunks,
        buffers=parse_buffers(args.buffers),
        order=args.order,
    )


def report_from_args(args: argparse.Namespace) -> Report:
    costs = parse_costs(args.costs)  # cheap checks first: a typo costs no schedule
    schedule = schedule_from_args(args)
    if args.stage is not None and not 0 <= args.stage < schedule.num_stages:
        raise InputError(f"--stage {args.stage} is outside stages 0..{schedule.num_stages - 1}")
    return check(schedule, costs, args.model, communicators=getattr(args, "communicators", "eager"))


def selected_ranks(args: argparse.Namespace, report: Report) -> Optional[list[int]]:
    return None if args.stage is None else [report.schedule.stage_to_rank[args.stage]]


def emit(text: str, out: Optional[str]) -> None:
    """Print ``text``, or write it to ``out`` (a full disk or an unwritable path is an InputError)."""
    if out:
        write_text(out, text, "--out")
    else:
        print(text, end="" if text.endswith("\n") else "\n")


__all__ = [
    "COST_KEYS",
    "add_schedule_options",
    "refuse_generator_options",
    "parse_buffers",
    "parse_costs",
    "schedule_from_args",
    "p2p_conventions",
    "from_csv",
    "require_size",
    "report_from_args",
    "selected_ranks",
    "emit",
]
