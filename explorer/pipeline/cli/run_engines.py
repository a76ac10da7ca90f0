"""``explorer run --engine torch|both``: PyTorch's own pipeline engine, alone or beside ours.

(``deepspeed`` and ``all`` are answered by :mod:`explorer.pipeline.cli.run_deepspeed`.)

The JSON keeps ``explorer run``'s contract (``ok``, ``losses``, ``bitwise_equal_to_reference``,
``failure``, ``instructions``) and adds ``engine``, ``torch_engine`` (PyTorch's run: status,
which order ran and why, losses, reference checks, makespan, its ``PP:`` actions) and, for
``both``, ``comparison`` (per-kind times and makespans side by side). With ``--engine torch``
the contract keys describe PyTorch's run and ``instructions`` are its ``PP:`` actions.

Exit codes: 0 when every engine that ran finished and matched the reference (ours bitwise;
PyTorch's within rtol 1e-5 because it averages gradients after summing them, see
:mod:`explorer.pipeline.runtime.torch_engine`), 1 otherwise (including a schedule PyTorch's
engine cannot run, reported under ``torch_engine.status``), 2 on bad input.
"""

from __future__ import annotations

import argparse
import json

from explorer.errors import InputError
from explorer.inputs import write_text


def report_engines(spec, args: argparse.Namespace) -> int:
    """Run ``spec`` on ``args.engine`` (torch or both), print the result, return the exit code."""
    if args.engine == "torch" and args.trace:
        raise InputError(
            "--trace writes the explorer engine's trace; with --engine torch, PyTorch's profiler traces "
            "are torch_rank<R>.json in the run folder (--out DIR)"
        )
    if args.engine == "deepspeed":
        from explorer.pipeline.cli.run_deepspeed import report_deepspeed

        return report_deepspeed(spec, args)
    if args.engine == "all":
        from explorer.pipeline.cli.run_deepspeed import report_all

        return report_all(spec, args)
    if args.engine == "torch":
        from explorer.pipeline.runtime.torch_engine import run_torch_engine

        torch_run = run_torch_engine(spec, args.out, order=args.torch_order)
        both = None
        ok = torch_run.ok and bool(torch_run.within_tolerance)
        doc = {
            "ok": torch_run.ok,
            "losses": torch_run.losses,
            "bitwise_equal_to_reference": torch_run.bitwise_equal_to_reference,
            "failure": torch_run.failure.to_dict() if torch_run.failure else None,
            "instructions": torch_run.records,
            "engine": "torch",
            "torch_engine": _without_actions(torch_run),
        }
        text = _torch_line(torch_run)
    else:
        from explorer.pipeline.runtime.engines import compare_engines

        both = compare_engines(spec, args.out, order=args.torch_order)
        ours, torch_run = both.explorer, both.torch
        ok = (
            ours.ok
            and bool(ours.bitwise_equal_to_reference)
            and torch_run.ok
            and bool(torch_run.within_tolerance)
        )
        doc = {
            **ours.to_dict(),
            "engine": "both",
            "torch_engine": torch_run.to_dict(),
            "comparison": both.to_dict(),
        }
        verdict = (
            f"failed: {ours.failure.message}"
            if ours.failure
            else f"ok, bitwise equal to the reference: {ours.bitwise_equal_to_reference}"
        )
        text = f"explorer engine: {verdict}\n{_torch_line(torch_run)}\n" + (
            both.table() if torch_run.records else ""
        )
    print(json.dumps(doc) if args.json else text.rstrip(), flush=True)
    if (
        args.trace and both is not None
    ):  # after the result: a trace that cannot be written loses no run
        write_text(args.trace, json.dumps(both.explorer.chrome_trace()), "--trace")
    return 0 if ok else 1


def _without_actions(torch_run) -> dict:
    part = torch_run.to_dict()
    part.pop("instructions")  # already the top-level "instructions"
    return part


def _torch_line(torch_run) -> str:
    order = (
        f"{torch_run.order.torch_schedule or 'explorer'} order"
        if torch_run.order.source == "torch"
        else "the explorer's order"
    )
    if not torch_run.ok:
        return f"torch engine ({torch_run.status}, {order}): {torch_run.failure.message}"
    note = f" [{torch_run.order.problem}]" if torch_run.order.problem else ""
    return (
        f"torch engine ({order}{note}): bitwise equal to the reference: {torch_run.bitwise_equal_to_reference}, "
        f"within tolerance: {torch_run.within_tolerance} (max |diff| {torch_run.max_abs_diff_to_reference:.3g}), "
        f"makespan {torch_run.makespan() * 1e3:.2f} ms"
    )


__all__ = ["report_engines"]
