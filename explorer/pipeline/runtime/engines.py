"""Two or three engines on one run: ours (:mod:`.launch`), PyTorch's (:mod:`.torch_engine`) and
DeepSpeed's (:mod:`.deepspeed.engine`), one after the other (never at once: on a small machine
they would steal each other's cores).

:func:`compare_engines` runs one :class:`RunSpec` on ours and PyTorch's,
:func:`compare_three_engines` adds DeepSpeed's. Only the runs are here: what the results say
side by side, and whether each passed, is :mod:`explorer.pipeline.analysis.engines`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Union

from explorer.errors import InputError
from explorer.pipeline.analysis.engines import EngineComparison, ThreeEngines
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.torch_engine import run_torch_engine
from explorer.pipeline.runtime.torch_orders import OrderSource
from explorer.pipeline.traces.result import PipelineRunResult


def compare_engines(
    spec: RunSpec, folder: Union[None, str, Path] = None, *, order: OrderSource = "auto"
) -> EngineComparison:
    """Run ``spec`` on our engine, then on PyTorch's; ``folder`` gets ``explorer/`` and ``torch/`` run folders."""
    from explorer.pipeline.runtime.launch import run_pipeline

    base = Path(folder) if folder else None
    ours = run_pipeline(spec, base / "explorer" if base else None)
    theirs = run_torch_engine(spec, base / "torch" if base else None, order=order)
    return EngineComparison(ours, theirs)


def run_deepspeed(spec: RunSpec, folder: Union[None, str, Path] = None) -> PipelineRunResult:
    """DeepSpeed's engine on ``spec``; a DeepSpeed without the internals the explorer needs is bad input."""
    from explorer.pipeline.runtime.deepspeed.engine import run_deepspeed_engine

    result = run_deepspeed_engine(spec, folder)
    _refuse_unsupported(result)
    return result


def _refuse_unsupported(result: PipelineRunResult) -> None:
    """An unsupported DeepSpeed is the user's install, not a run that failed: its one line, exit 2."""
    f = result.failure
    if f is not None and f.exception_type == "UnsupportedDeepSpeed":
        raise InputError(f.message.split(": ", 1)[-1])


def compare_three_engines(
    spec: RunSpec, folder: Union[None, str, Path] = None, *, order: OrderSource = "auto"
) -> ThreeEngines:
    """Ours, PyTorch's, then DeepSpeed's engine on ``spec``; ``folder`` gets a run folder for each.

    Whether DeepSpeed can run ``spec`` is checked before anything runs.
    """
    from explorer.pipeline.runtime.deepspeed.engine import check_runnable

    check_runnable(spec)
    base = Path(folder) if folder else None
    both = compare_engines(spec, base, order=order)
    ds = run_deepspeed(spec, base / "deepspeed" if base else None)
    return ThreeEngines(both.explorer, both.torch, ds)


__all__ = [
    "EngineComparison",
    "ThreeEngines",
    "compare_engines",
    "compare_three_engines",
    "run_deepspeed",
]
