"""``explorer run --engine torch|both|deepspeed|all``: PyTorch's and DeepSpeed's own engines, alone
or beside ours.

The JSON keeps ``explorer run``'s contract (``ok``, ``losses``, ``bitwise_equal_to_reference``,
``failure``, ``instructions``) and adds ``engine`` and:

- ``torch``: ``torch_engine`` (PyTorch's run: status, which order ran and why, losses, reference
  checks, makespan); the contract keys describe PyTorch's run and ``instructions`` are its
  ``PP:`` actions;
- ``both``: ``torch_engine`` and ``comparison`` (per-kind times and makespans side by side);
- ``deepspeed``: ``deepspeed_version`` and ``run_folder``; the failure is the first in time across
  ranks, with DeepSpeed's exception, the tail of its traceback and the later failures as
  ``consequences``;
- ``all``: the three engines one after the other, side by side (``comparison``): losses bitwise
  between engines where they can agree (the explorer's and DeepSpeed's scale each loss by 1/M
  before its backward; PyTorch's divides the summed gradients after the last backward, bitwise
  only when M is a power of two), per-kind times and makespans; ``--html`` overlays each
  engine's last iteration on the simulation of the same schedule.

Exit codes: 0 when every engine that ran finished and matched the reference (ours and
DeepSpeed's bitwise; PyTorch's within rtol 1e-5, see :mod:`explorer.pipeline.analysis.engines`),
1 otherwise (including a schedule PyTorch's engine cannot run, reported under
``torch_engine.status``), 2 on bad input (including a DeepSpeed release without the internals
the explorer needs).

The runs are :mod:`explorer.pipeline.runtime.engines`', the comparisons and verdicts
:mod:`explorer.pipeline.analysis.engines`', the words :mod:`explorer.pipeline.printout.engines`';
this module only chooses and prints.
"""

from __future__ import annotations

import argparse
import json

from explorer.errors import InputError
from explorer.inputs import write_text
from explorer.pipeline.printout import engines as words
from explorer.verdict import with_verdict


def report_engines(spec, args: argparse.Namespace) -> int:
    """Run ``spec`` on ``args.engine`` (not the explorer's alone), print the result, return the exit code."""
    if args.engine == "torch" and args.trace:
        raise InputError(
            "--trace writes the explorer engine's trace; with --engine torch, PyTorch's profiler traces "
            "are torch_rank<R>.json in the run folder (--out DIR)"
        )
    report = {"torch": _torch, "both": _both, "deepspeed": _deepspeed, "all": _all}[args.engine]
    return report(spec, args)


def _torch(spec, args: argparse.Namespace) -> int:
    from explorer.pipeline.analysis.engines import torch_passed
    from explorer.pipeline.runtime.torch_engine import run_torch_engine

    torch_run = run_torch_engine(spec, args.out, order=args.torch_order)
    code = 0 if torch_passed(torch_run) else 1
    _print(words.torch_doc(torch_run), words.torch_line(torch_run).rstrip(), args, code)
    return code


def _both(spec, args: argparse.Namespace) -> int:
    from explorer.pipeline.runtime.engines import compare_engines

    both = compare_engines(spec, args.out, order=args.torch_order)
    code = 0 if both.passed else 1
    _print(words.both_doc(both), words.both_text(both).rstrip(), args, code)
    if args.trace:  # after the result: a trace that cannot be written loses no run
        write_text(args.trace, json.dumps(both.explorer.chrome_trace()), "--trace")
    return code


def _deepspeed(spec, args: argparse.Namespace) -> int:
    from explorer.pipeline.analysis.engines import explorer_passed
    from explorer.pipeline.runtime.engines import run_deepspeed

    result = run_deepspeed(spec, args.out)
    code = 0 if explorer_passed(result) else 1
    _print(words.deepspeed_doc(result), words.deepspeed_line(result), args, code)
    if args.trace:
        write_text(args.trace, json.dumps(result.chrome_trace()), "--trace")
    return code


def _all(spec, args: argparse.Namespace) -> int:
    from explorer.pipeline.analysis.engines import side_by_side
    from explorer.pipeline.runtime.engines import compare_three_engines

    three = compare_three_engines(spec, args.out, order=args.torch_order)
    side = side_by_side(three.explorer, three.torch, three.deepspeed)
    if args.html:
        _write_overlays(args.html, spec.build_schedule(), three)
    code = 0 if three.passed else 1
    _print(words.all_doc(three, side), words.side_by_side_table(side), args, code)
    return code


def _print(doc: dict, text: str, args: argparse.Namespace, code: int) -> None:
    """The text, or the document with ``ok`` as the exit code says (:mod:`explorer.verdict`)."""
    print(json.dumps(with_verdict(doc, code)) if args.json else text, flush=True)


def _write_overlays(path: str, schedule, three) -> None:
    """One offline page: each engine's last iteration overlaid on the simulation of ``schedule``.

    Each overlay re-costs the simulation from that engine's own measurement, so the three lanes
    say where each engine spent its time against the same plan.
    """
    from explorer import inputs
    from explorer.pipeline.analysis import check
    from explorer.pipeline.analysis.measured import measured_vs_simulated
    from explorer.pipeline.views.overlay import overlay_figure
    from explorer.ui.html import page

    report = check(schedule)
    sections: list = []
    for title, result in (
        ("The explorer's engine", three.explorer),
        (f"PyTorch's _PipelineScheduleRuntime ({three.torch.torch_version})", three.torch),
        (
            f"DeepSpeed's PipelineEngine ({three.deepspeed.details.get('deepspeed_version')})",
            three.deepspeed,
        ),
    ):
        sections.append(f"<h2>{title}</h2>")
        trace = result.trace()
        if len(trace) == 0:
            sections.append(
                "<p>No instruction was measured: the engine did not run an iteration.</p>"
            )
        else:
            sections.append(overlay_figure(measured_vs_simulated(report, trace)))
    inputs.write_text(path, page(f"Three engines on {schedule.name}", sections), "HTML report")


__all__ = ["report_engines"]
