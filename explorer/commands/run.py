"""``explorer run``: execute a schedule for real on torch.distributed; exit 0 ok, 1 failed or not bitwise equal, 2 bad input.

Started by ``torchrun`` (``TORCHELASTIC_RUN_ID`` is set), the same command is one rank of the
job instead of a launcher: see :mod:`explorer.runtime.pipeline` for the multi-machine command.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from explorer.commands.schedule_options import parse_buffers
from explorer.errors import InputError
from explorer.schedules import KINDS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("run", help="run a schedule for real (torch.distributed) and check it bitwise",
                              description="Run a schedule on torch.distributed, one process per rank. Exit 0 when it "
                                          "ran and matched the reference bitwise, 1 when it failed or did not, 2 on bad input.")
    p.add_argument("--kind", choices=list(KINDS), help="schedule generator")
    p.add_argument("--stages", type=int, metavar="P", help="pipeline stages (ranks x chunks)")
    p.add_argument("--microbatches", type=int, metavar="M", help="micro-batches per batch")
    p.add_argument("--chunks", type=int, default=1, metavar="V", help="virtual stages per rank (interleaved-1f1b)")
    p.add_argument("--buffers", default=None, metavar="N|legacy|fixed|minimal", help="buffers per stage")
    p.add_argument("--order", choices=["legacy", "fixed"], default=None, help="DeepSpeed send/recv order (deepspeed-train)")
    p.add_argument("--rules", default="", metavar="R1,R2",
                   help="rewrite rules applied to the schedule before it runs (see `explorer fix`)")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo", help="gloo (CPU, default) or nccl (one GPU per rank)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="cpu (default with gloo) or cuda")
    p.add_argument("--model", default="mlp", metavar="mlp|transformer|MODULE:FUNCTION",
                   help="built-in model or a function returning (layers, loss_fn, data_fn)")
    p.add_argument("--cuts", default=None, metavar="I,J,...", help="layer indices where stages 1.. begin (default: even split)")
    p.add_argument("--microbatch-size", type=int, default=4, metavar="N", help="samples per micro-batch")
    p.add_argument("--iterations", type=int, default=1, metavar="N", help="training iterations")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stall-timeout", type=float, default=20.0, metavar="S", help="seconds a rank may wait in one exchange")
    p.add_argument("--out", default=None, metavar="DIR", help="run folder (live per-rank traces); default a temporary one")
    p.add_argument("--collect", default=None, metavar="DIR", help="do not run: read the result a run left in DIR")
    p.add_argument("--trace", default=None, metavar="OUT.json", help="write a Chrome/Perfetto trace of the run")
    p.add_argument("--engine", choices=["explorer", "torch", "both"], default="explorer",
                   help="explorer (ours, default), torch (torch.distributed.pipelining's runtime, timed by the profiler's "
                        "PP: events) or both, side by side; torch and both run on gloo/CPU")
    p.add_argument("--torch-order", choices=["auto", "torch", "explorer"], default="auto",
                   help="compute order PyTorch's engine runs: its own schedule class's (torch), this schedule's (explorer), "
                        "or PyTorch's when it has one that is whole (auto)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from explorer.runtime.pipeline.spec import ModelSpec, RunSpec

    if args.collect:
        if args.engine != "explorer":
            raise InputError(f"--collect reads a run of the explorer engine; drop --engine {args.engine}")
        return _report(_collected(Path(args.collect)), args)
    if not args.kind or args.stages is None or args.microbatches is None:
        raise InputError("--kind, --stages and --microbatches are required (or --collect DIR to read a finished run)")
    from explorer.analysis import build
    from explorer.analysis.rules import apply_rules, parse_rules

    rules = parse_rules(args.rules or "")  # a typo costs no launch
    schedule = apply_rules(build(args.kind, args.stages, args.microbatches, chunks=args.chunks,
                                 buffers=parse_buffers(args.buffers), order=args.order), rules)
    device = args.device or ("cuda" if args.backend == "nccl" else "cpu")
    spec = RunSpec.for_schedule(schedule, model=ModelSpec(args.model, cuts=_cuts(args.cuts)), backend=args.backend,
                                device=device, microbatch_size=args.microbatch_size, iterations=args.iterations,
                                seed=args.seed, stall_timeout_s=args.stall_timeout)
    _check_devices(spec)
    from explorer.runtime.pipeline.launch import preflight, run_pipeline

    verdict = preflight(schedule)
    if verdict is not None:  # under torchrun only rank 0 speaks
        return _report(verdict, args) if os.environ.get("RANK", "0") == "0" else 1
    if "TORCHELASTIC_RUN_ID" in os.environ:
        if args.engine != "explorer":
            raise InputError(f"--engine {args.engine} starts its own processes on this machine: run it without torchrun")
        return _as_torchrun_rank(spec, args)
    if args.engine != "explorer":
        from explorer.commands.run_engines import report_engines

        return report_engines(spec, args)
    return _report(run_pipeline(spec, args.out, check_first=False), args)


def _as_torchrun_rank(spec, args: argparse.Namespace) -> int:
    """One rank of a torchrun job: write the spec, run the worker, rank 0 reports."""
    from explorer.runtime.pipeline import worker

    folder = Path(args.out or f"explorer-run-{os.environ['TORCHELASTIC_RUN_ID']}")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f"spec.json.{os.environ['RANK']}"
    tmp.write_text(json.dumps(spec.to_json(), indent=1))  # every rank writes the same spec; rename is atomic
    tmp.replace(folder / "spec.json")
    code = worker.main(folder)
    if os.environ["RANK"] != "0":
        return code
    return _report(_collected(folder), args)


def _collected(folder: Path):
    from explorer.runtime.pipeline.result import collect
    from explorer.runtime.pipeline.spec import RunSpec

    return collect(folder, RunSpec.read(folder).build_schedule())


def _report(result, args: argparse.Namespace) -> int:
    if args.trace:
        result.write_chrome_trace(Path(args.trace))
    if args.json:
        print(json.dumps(result.to_dict()))
    elif result.failure:
        print(f"failed: {result.failure['message']}")
    else:
        verdict = "bitwise equal to" if result.bitwise_equal_to_reference else "DIFFERENT from"
        print(f"ok: {len(result.losses)} micro-batch losses and final gradients {verdict} the reference "
              f"(run folder {result.folder})")
    return 0 if result.ok and result.bitwise_equal_to_reference else 1


def _cuts(text):
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--cuts {text!r}: write layer indices separated by commas, e.g. 2,4,6") from None


def _check_devices(spec) -> None:
    """NCCL needs one GPU per rank on each machine; say what is missing before anything starts."""
    if spec.device != "cuda":
        return
    import torch

    local = int(os.environ.get("LOCAL_WORLD_SIZE", spec.world_size))
    found = torch.cuda.device_count()
    if found == 0:
        raise InputError("--device cuda: this machine has no CUDA device; use --backend gloo --device cpu")
    if spec.backend == "nccl" and found < local:
        raise InputError(f"--backend nccl needs one GPU per rank: {local} ranks here but {found} GPU(s); "
                         "use --backend gloo --device cuda to share one GPU (transfers go through host memory)")
