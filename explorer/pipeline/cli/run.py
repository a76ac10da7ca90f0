"""``explorer run``: execute a schedule for real on torch.distributed; exit 0 ok, 1 failed or not bitwise equal, 2 bad input.

Started by ``torchrun`` (``TORCHELASTIC_RUN_ID`` is set), the same command is one rank of the
job instead of a launcher: see :mod:`explorer.pipeline.runtime` for the multi-machine command.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from pathlib import Path
from typing import Optional

from explorer import cli_options
from explorer.errors import InputError, excerpt
from explorer.inputs import write_text
from explorer.pipeline.cli.schedule_options import (
    Limits,
    add_schedule_choice,
    parse_buffers,
    refuse_generator_options,
    rules_from_args,
)
from explorer.verdict import with_verdict


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "run",
        help="run a schedule for real (torch.distributed) and check it bitwise",
        description="Run a schedule on torch.distributed, one process per rank. Exit 0 when it "
        "ran and matched the reference bitwise, 1 when it failed or did not, 2 on bad input.",
    )
    add_schedule_choice(p, RUN_LIMITS, csv=False)
    _add_job_options(p)
    _add_output_options(p)
    _add_engine_options(p)
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _add_job_options(p: argparse.ArgumentParser) -> None:
    """What runs: the backend and device, the model and its cuts, the data, the stall timeout."""
    p.add_argument(
        "--backend",
        choices=["gloo", "nccl"],
        default="gloo",
        help="gloo (CPU, default) or nccl (one GPU per rank)",
    )
    p.add_argument(
        "--device", choices=["cpu", "cuda"], default=None, help="cpu (default with gloo) or cuda"
    )
    p.add_argument(
        "--model",
        default="mlp",
        metavar="mlp|transformer|MODULE:FUNCTION",
        type=_model_name,
        help="built-in model or a function returning (layers, loss_fn, data_fn)",
    )
    p.add_argument(
        "--cuts",
        default=None,
        metavar="I,J,...",
        help="layer indices where stages 1.. begin (default: even split)",
    )
    p.add_argument(
        "--microbatch-size",
        default=4,
        metavar="N",
        help="samples per micro-batch",
        type=cli_options.count(
            "--microbatch-size",
            hi=4096,
            label="micro-batch size",
            why="every rank holds a micro-batch's activations per buffer",
        ),
    )
    p.add_argument(
        "--iterations",
        default=1,
        metavar="N",
        help="training iterations",
        type=cli_options.count("--iterations", hi=1000, label="iterations", why=_WORK_WHY),
    )
    p.add_argument(
        "--seed",
        default=0,
        type=cli_options.count(
            "--seed",
            lo=0,
            hi=2**63 - 1,
            label="seed",
            what="integer",
            why="torch.manual_seed's range",
        ),
    )
    p.add_argument(
        "--stall-timeout",
        default=20.0,
        metavar="S",
        help="seconds a rank may wait in one exchange",
        type=cli_options.seconds("--stall-timeout", "a day"),
    )


def _add_output_options(p: argparse.ArgumentParser) -> None:
    """Where the run writes (or, with --collect, what it reads back instead of running)."""
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        type=cli_options.output_dir("--out"),
        help="run folder (live per-rank traces); default a temporary one",
    )
    p.add_argument(
        "--collect",
        default=None,
        metavar="DIR",
        type=_run_folder,
        help="do not run: read the result a run left in DIR",
    )
    p.add_argument(
        "--trace",
        default=None,
        metavar="OUT.json",
        type=cli_options.output_file("--trace"),
        help="write a Chrome/Perfetto trace of the run (its path is checked before the run starts)",
    )


def _add_engine_options(p: argparse.ArgumentParser) -> None:
    """Whose engine runs it, and how the explorer's own sends its messages."""
    p.add_argument(
        "--engine",
        choices=["explorer", "torch", "both", "deepspeed", "all"],
        default="explorer",
        help="explorer (ours, default), torch (torch.distributed.pipelining's runtime, timed by the profiler's "
        "PP: events), both (explorer and torch side by side), deepspeed (DeepSpeed's own PipelineEngine, "
        "traced instruction by instruction) or all three side by side; torch, both and all run on gloo/CPU",
    )
    p.add_argument(
        "--torch-order",
        choices=["auto", "torch", "explorer"],
        default="auto",
        help="compute order PyTorch's engine runs: its own schedule class's (torch), this schedule's (explorer), "
        "or PyTorch's when it has one that is whole (auto)",
    )
    p.add_argument(
        "--html",
        default=None,
        metavar="OUT.html",
        type=cli_options.output_file("--html"),
        help="with --engine all: a self-contained page with each engine's measurement overlaid on "
        "the simulation of the same schedule",
    )
    p.add_argument(
        "--untagged",
        action="store_true",
        help="explorer engine: send every message between two ranks untagged, on one channel per "
        "rank pair (as Megatron-LM does); messages then pair first in, first out across directions",
    )
    p.add_argument(
        "--recv-pool",
        action="store_true",
        help="explorer engine: one receive buffer per direction, allocated once and reused (as "
        "DeepSpeed does)",
    )


def _outputs_spare_the_run_folder(args: argparse.Namespace) -> None:
    """``--trace`` and ``--html`` write after the run: not over the records it wrote (or reads)."""
    from explorer.pipeline.traces.folder import refuse_writing_over_the_run

    folder = args.collect or args.out
    for option, output in (("--trace", args.trace), ("--html", args.html)):
        if folder and output:
            refuse_writing_over_the_run(str(output), str(folder), option)


def run(args: argparse.Namespace) -> int:
    from explorer.pipeline.runtime.spec import ModelSpec, RunSpec

    if args.html and args.engine != "all":
        raise InputError(
            f"--html draws the three engines side by side: use it with --engine all, not --engine {args.engine}"
        )
    _outputs_spare_the_run_folder(args)
    if args.collect:
        given = [
            option
            for option, value in (
                ("--out", args.out),
                ("--kind", args.kind),
                ("--from", args.from_class),
                ("--stages", args.stages),
                ("--microbatches", args.microbatches),
            )
            if value is not None
        ]
        if given:  # they were silently ignored: the folder's own spec says what ran
            raise InputError(
                f"--collect reads a finished run as its folder's spec.json describes it: drop "
                f"{', '.join(given)} (or drop --collect to start a run)"
            )
        if args.engine != "explorer":
            raise InputError(
                f"--collect reads a run of the explorer engine; drop --engine {args.engine}"
            )
        from explorer.inputs import check_plain_files
        from explorer.pipeline.runtime.run_folder import collected
        from explorer.pipeline.schedules.torch_csv import ORDER_FILE

        folder = Path(args.collect)
        check_plain_files(str(folder), "--collect")  # a FIFO there blocked for ever, as in read
        if (folder / ORDER_FILE).is_file() and not any(folder.glob("rank*.jsonl")):
            raise InputError(
                f"--collect {excerpt(str(folder))}: a run of PyTorch's engine (--engine torch), "
                "and --collect reads the explorer engine's runs: read it with `explorer read "
                f"{excerpt(str(folder))}`"
            )
        return report_result(collected(folder, "--collect"), args)
    if args.kind and args.from_class:
        raise InputError("give either --kind or --from, not both")
    if args.from_class:
        refuse_generator_options(args)
    if not (args.kind or args.from_class) or args.stages is None or args.microbatches is None:
        raise InputError(
            "--kind (or --from), --stages and --microbatches are required (or --collect DIR to read a finished run)"
        )
    _check_work(args)
    from explorer.pipeline.analysis import build
    from explorer.pipeline.analysis.rules import apply_rules

    rules = rules_from_args(args)  # a typo costs no launch
    if args.from_class:
        from explorer.pipeline.runtime.user_schedule import schedule_from_class

        base = schedule_from_class(args.from_class, args.stages, args.microbatches, 60.0)
    else:
        base = build(
            args.kind,
            args.stages,
            args.microbatches,
            chunks=args.chunks,
            buffers=parse_buffers(args.buffers),
            order=args.order,
        )
    schedule = apply_rules(base, rules)
    device = args.device or ("cuda" if args.backend == "nccl" else "cpu")
    spec = RunSpec.for_schedule(
        schedule,
        model=ModelSpec(args.model, cuts=_cuts(args.cuts)),
        backend=args.backend,
        device=device,
        microbatch_size=args.microbatch_size,
        iterations=args.iterations,
        seed=args.seed,
        stall_timeout_s=args.stall_timeout,
        # DeepSpeed's engine runs the class itself (its instructions mapped onto today's), unless rules rewrote it
        schedule_class=args.from_class if args.from_class and not rules else "",
        p2p_tags=not args.untagged,
        recv_pool=args.recv_pool,
    )
    _check_devices(spec, args.engine)
    if (args.untagged or args.recv_pool) and args.engine != "explorer":
        flag = "--untagged" if args.untagged else "--recv-pool"
        raise InputError(
            f"{flag} changes how the explorer's engine exchanges messages: use it with --engine "
            f"explorer (--engine {args.engine} runs another engine's own P2P)"
        )
    from explorer.pipeline.runtime.launch import preflight, run_pipeline

    verdict = preflight(schedule)
    if verdict is not None:  # under torchrun only rank 0 speaks
        return report_result(verdict, args) if os.environ.get("RANK", "0") == "0" else 1
    if "TORCHELASTIC_RUN_ID" in os.environ:
        if args.engine != "explorer":
            raise InputError(
                f"--engine {args.engine} starts its own processes on this machine: run it without torchrun"
            )
        return _as_torchrun_rank(spec, args)
    if args.engine != "explorer":
        from explorer.pipeline.cli.run_engines import report_engines

        return report_engines(spec, args)
    return report_result(run_pipeline(spec, args.out, check_first=False), args)


def _as_torchrun_rank(spec, args: argparse.Namespace) -> int:
    """One rank of a torchrun job: write the spec, run the worker, rank 0 reports."""
    from explorer.pipeline.runtime import worker

    folder = Path(args.out or f"explorer-run-{os.environ['TORCHELASTIC_RUN_ID']}")
    folder.mkdir(parents=True, exist_ok=True)
    spec = dataclasses.replace(
        spec, run_id=os.environ["TORCHELASTIC_RUN_ID"]
    )  # the job's id names its records
    tmp = folder / f"spec.json.{os.environ['RANK']}"
    tmp.write_text(
        json.dumps(spec.to_json(), indent=1)
    )  # every rank writes the same spec; rename is atomic
    tmp.replace(folder / "spec.json")
    code = worker.main(folder)
    if os.environ["RANK"] != "0":
        return code
    from explorer.pipeline.runtime.run_folder import collected

    return report_result(collected(folder), args)


def report_result(result, args: argparse.Namespace, extra: Optional[dict] = None) -> int:
    """Print the result first, then write the trace: a trace that cannot be written never loses a
    run. The exit code (and the document's ``ok``): 0 when the run finished and matched the
    reference bitwise, else 1. ``extra``: keys the JSON document carries before the run's."""
    code = 0 if result.ok and result.bitwise_equal_to_reference else 1
    if args.json:
        print(json.dumps(with_verdict({**(extra or {}), **result.to_dict()}, code)), flush=True)
    elif result.failure:
        said = "running" if result.failure.kind == "running" else "failed"  # read while it runs
        print(f"{said}: {result.failure.message}", flush=True)
    else:
        same = bool(result.bitwise_equal_to_reference)
        print(
            f"{'ok' if same else 'ran to its end, but WRONG'}: {len(result.losses)} micro-batch "
            f"losses and final gradients {'bitwise equal to' if same else 'DIFFERENT from'} the "
            f"reference (run folder {result.folder})",
            flush=True,
        )
        warning = result.loss_warning()
        if warning:
            print(warning, flush=True)
    if args.trace:
        write_text(args.trace, json.dumps(result.chrome_trace()), "--trace")
    return code


def _cuts(text):
    """``2,4,6``: layer indices, each a whole number of at most six digits."""
    if text is None:
        return None
    parse = cli_options.count(
        "--cuts", hi=10**6, label="cut points", why="no model has more layers"
    )
    try:
        return tuple(parse(x) for x in text.split(","))
    except argparse.ArgumentTypeError as exc:
        raise InputError(
            f"--cuts {excerpt(text)}: write layer indices separated by commas, e.g. 2,4,6 ({exc})"
        ) from None


#: Ranks one machine runs: each is a process that imports torch (about 0.3 GB).
MAX_RANKS = 64
MAX_MICROBATCHES = 4096
#: Micro-batches run in all (x iterations): each one runs on every stage for real, every instruction recorded.
MAX_MICROBATCH_RUNS = 65536
_RANK_WHY = "one process per rank, each importing torch (about 0.3 GB)"
_WORK_WHY = "every micro-batch runs for real on every stage and every instruction is recorded"
#: A run starts a process per rank: fewer stages than the analyses take.
RUN_LIMITS = Limits(MAX_RANKS, MAX_MICROBATCHES, 16, _RANK_WHY, _WORK_WHY, _RANK_WHY)


def _check_work(args: argparse.Namespace) -> None:
    """Refuse a run that would go on for hours before anything starts, saying the limit and why."""
    if args.microbatches is not None and args.microbatches * args.iterations > MAX_MICROBATCH_RUNS:
        raise InputError(
            f"--microbatches {args.microbatches:,} x --iterations {args.iterations:,} = "
            f"{args.microbatches * args.iterations:,} micro-batch runs, more than the limit of "
            f"{MAX_MICROBATCH_RUNS:,}: {_WORK_WHY}; use fewer"
        )


def _model_name(text: str) -> str:
    """``mlp``, ``transformer`` or ``MODULE:FUNCTION`` (an argparse type)."""
    if text in ("mlp", "transformer"):
        return text
    if ":" not in text:
        raise argparse.ArgumentTypeError(
            f"{excerpt(text)} is not a model: use mlp, transformer or MODULE:FUNCTION "
            "naming a function that returns (layers, loss_fn, data_fn)"
        )
    return cli_options.user_ref("--model", "my_models:build")(text)


def _run_folder(text: str) -> str:
    """An existing folder (an argparse type); its contents are checked when read."""
    if not os.path.isdir(text):
        what = "does not exist" if not os.path.exists(text) else "is not a folder"
        raise argparse.ArgumentTypeError(
            f"{excerpt(text)} {what}: give the run folder an `explorer run --out DIR` wrote"
        )
    return text


def _check_devices(spec, engine: str) -> None:
    """Refuse a device/backend/engine combination that cannot run here, before anything starts."""
    from explorer.pipeline.runtime.launch import refuse_impossible_devices

    refuse_impossible_devices(dataclasses.replace(spec, engine=engine))


__all__ = [
    "register",
    "run",
    "report_result",
    "MAX_RANKS",
    "MAX_MICROBATCHES",
    "MAX_MICROBATCH_RUNS",
]
