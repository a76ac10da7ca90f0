"""What ``explorer run --engine torch|both|deepspeed|all`` prints: each engine's JSON document and
its lines of text.

Only words here: the runs are :mod:`explorer.pipeline.runtime.engines`', the comparisons
:mod:`explorer.pipeline.analysis.engines`'. Every JSON document keeps
``explorer run``'s contract (``ok``, ``losses``, ``bitwise_equal_to_reference``, ``failure``,
``instructions``) and adds what the engine adds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from explorer.pipeline.analysis.engines import (
    explorer_passed,
    torch_off_by_microbatches,
    torch_passed,
)
from explorer.verdict import with_verdict

if TYPE_CHECKING:
    from explorer.pipeline.analysis.engines import EngineComparison, ThreeEngines
    from explorer.pipeline.runtime.torch_engine import TorchRunResult
    from explorer.pipeline.traces.result import PipelineRunResult


def torch_doc(torch_run: TorchRunResult) -> dict:
    """``--engine torch``: the contract keys describe PyTorch's run; ``instructions`` are its ``PP:`` actions."""
    return {
        "ok": torch_run.ok,
        "losses": torch_run.losses,
        "bitwise_equal_to_reference": torch_run.bitwise_equal_to_reference,
        "failure": torch_run.failure.to_dict() if torch_run.failure else None,
        "instructions": torch_run.records,
        "why_off_reference": torch_off_by_microbatches(torch_run),
        "engine": "torch",
        "torch_engine": with_verdict(
            _without_actions(torch_run), 0 if torch_passed(torch_run) else 1
        ),
    }


def _torch_part(torch_run: TorchRunResult) -> dict:
    """PyTorch's run inside another engine's document: ``ok`` is its verdict (finished and
    within tolerance of the reference), as its own ``--engine torch`` document says."""
    return with_verdict(torch_run.to_dict(), 0 if torch_passed(torch_run) else 1)


def _without_actions(torch_run: TorchRunResult) -> dict:
    part = torch_run.to_dict()
    part.pop("instructions")  # already the top-level "instructions"
    return part


def torch_line(torch_run: TorchRunResult) -> str:
    """PyTorch's run in one line: which order ran, its verdicts and makespan, or its failure."""
    order = (
        f"{torch_run.order.torch_schedule or 'explorer'} order"
        if torch_run.order.source == "torch"
        else "the explorer's order"
    )
    if not torch_run.ok:
        message = torch_run.failure.message if torch_run.failure else ""
        return f"torch engine ({torch_run.status}, {order}): {message}"
    note = f" [{torch_run.order.problem}]" if torch_run.order.problem else ""
    why = torch_off_by_microbatches(torch_run)
    return (
        f"torch engine ({order}{note}): bitwise equal to the reference: {torch_run.bitwise_equal_to_reference}, "
        f"within tolerance: {torch_run.within_tolerance} (max |diff| {torch_run.max_abs_diff_to_reference:.3g}), "
        f"makespan {torch_run.makespan() * 1e3:.2f} ms" + (f"\n  {why}" if why else "")
    )


def both_doc(both: EngineComparison) -> dict:
    """``--engine both``: the explorer's run, PyTorch's beside it and the per-kind comparison."""
    return {
        **both.explorer.to_dict(),
        "engine": "both",
        "torch_engine": _torch_part(both.torch),
        "comparison": both.to_dict(),
    }


def both_text(both: EngineComparison) -> str:
    """The explorer's verdict, PyTorch's line and (when PyTorch measured anything) the kind table."""
    ours = both.explorer
    verdict = (
        f"failed: {ours.failure.message}"
        if ours.failure
        else ("ok" if explorer_passed(ours) else "ran to its end, but WRONG")
        + f", bitwise equal to the reference: {ours.bitwise_equal_to_reference}"
    )
    return f"explorer engine: {verdict}\n{torch_line(both.torch)}\n" + (
        both.table() if both.torch.records else ""
    )


def deepspeed_doc(result: PipelineRunResult) -> dict:
    """``--engine deepspeed``: the run's contract keys, its DeepSpeed version and run folder;
    ``ok`` is its verdict (finished and bitwise equal to the reference)."""
    doc = {
        **result.to_dict(),
        "engine": "deepspeed",
        "deepspeed_version": result.details.get("deepspeed_version"),
        "run_folder": str(result.folder) if result.folder else None,
    }
    return with_verdict(doc, 0 if explorer_passed(result) else 1)


def deepspeed_line(result: PipelineRunResult) -> str:
    """DeepSpeed's verdict; a failure with the tail of its traceback and what followed it."""
    version = result.details.get("deepspeed_version")
    f = result.failure.to_dict() if result.failure else None
    if f and result.failure is not None:
        where = f"{result.failure.where()}: " if f.get("instruction") else ""
        tail = "\n".join(
            f"    {line}" for line in (f.get("traceback_tail") or "").splitlines()[-2:]
        )
        later = f.get("consequences") or []
        then = "\n  then: " + "\n  then: ".join(later) if later else ""
        return f"DeepSpeed {version}: failed: {where}{f['message']}\n{tail}{then}".rstrip()
    same = explorer_passed(result)
    verdict = "bitwise equal to" if same else "DIFFERENT from"
    warning = result.loss_warning()
    return (
        f"DeepSpeed {version}: {'ok' if same else 'ran to its end, but WRONG'}: "
        f"{len(result.losses)} micro-batch losses and final gradients {verdict} the reference "
        f"(run folder {result.folder})"
    ) + (f"\n{warning}" if warning else "")


def all_doc(three: ThreeEngines, side: dict) -> dict:
    """``--engine all``: the explorer's run, each other engine's document and ``side`` as ``comparison``."""
    return {
        **three.explorer.to_dict(),
        "engine": "all",
        "deepspeed_version": three.deepspeed.details.get("deepspeed_version"),
        "torch_engine": _torch_part(three.torch),
        "deepspeed_engine": deepspeed_doc(three.deepspeed),
        "comparison": side,
    }


def side_by_side_table(side: dict) -> str:
    """Text form of :func:`explorer.pipeline.analysis.engines.side_by_side`."""
    engines = ("explorer", "torch", "deepspeed")
    lines = [f"{'kind':<5}" + "".join(f" {e + ' n':>12} {'mean ms':>8}" for e in engines)]
    for row in side["kinds"]:
        lines.append(
            f"{row['kind']:<5}"
            + "".join(f" {row[e + '_n']:>12} {_ms(row[e + '_mean_ms']):>8}" for e in engines)
        )
    spans = side["makespan_ms"]
    lines.append("makespan ms: " + ", ".join(f"{e} {_ms(spans[e])}" for e in engines))
    lines.append(
        "bitwise equal to the reference: "
        + ", ".join(f"{e} {side['bitwise_equal_to_reference'][e]}" for e in engines)
    )
    lines.append(
        f"explorer and DeepSpeed losses and gradients bitwise equal: "
        f"{side['explorer_and_deepspeed_bitwise_equal']}"
    )
    lines.append(
        "PyTorch's RA/RG only post an irecv: its F/B include the wait for their input; the explorer's "
        "and DeepSpeed's receives block"
    )
    if side["why_torch_may_differ"]:
        lines.append(side["why_torch_may_differ"])
    for e in engines:
        f = side["failures"][e]
        if f:
            lines.append(f"{e} failed: {f['message']}")
    return "\n".join(lines)


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


__all__ = [
    "all_doc",
    "both_doc",
    "both_text",
    "deepspeed_doc",
    "deepspeed_line",
    "side_by_side_table",
    "torch_doc",
    "torch_line",
]
