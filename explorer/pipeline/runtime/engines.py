"""Two or three engines on one run: ours (:mod:`.launch`), PyTorch's (:mod:`.torch_engine`) and
DeepSpeed's (:mod:`.deepspeed.engine`), side by side.

:func:`compare_engines` runs one :class:`RunSpec` on each engine, one after the other (never at
once: on a small machine they would steal each other's cores), and :class:`EngineComparison`
lines up what each measured on its last iteration: losses, mean and median time per
instruction kind, and makespan. The kinds mean different things at the edges, and the table
says so rather than hide it: our receive blocks until the data is there, PyTorch's only posts
an ``irecv`` and waits inside the ``F``/``B`` that needs the data (the ``torch wait`` column).
:func:`compare_three_engines` adds DeepSpeed's run (:class:`ThreeEngines`; the comparison is
:func:`explorer.pipeline.analysis.engines.side_by_side`).

Each result says whether it *passed*: it ran and matched the reference (ours and DeepSpeed's
bitwise; PyTorch's within rtol 1e-5 because it averages gradients after summing them, see
:mod:`.torch_engine`). That is the verdict ``explorer run --engine ...`` exits with.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from explorer.errors import InputError
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.torch_engine import TorchRunResult, run_torch_engine
from explorer.pipeline.runtime.torch_orders import OrderSource
from explorer.pipeline.schedules.instructions import KIND_BY_CODE, Kind
from explorer.pipeline.schedules.torch_actions import TYPE_BY_KIND
from explorer.pipeline.traces.result import PipelineRunResult
from explorer.pipeline.traces.trace import last_iteration, makespan, record_kind

_ORDER = [
    Kind.LOAD,
    Kind.FORWARD,
    Kind.BACKWARD,
    Kind.BACKWARD_INPUT,
    Kind.BACKWARD_WEIGHT,
    Kind.SEND_ACTIVATION,
    Kind.RECV_ACTIVATION,
    Kind.SEND_GRAD,
    Kind.RECV_GRAD,
    Kind.OPTIMIZER_STEP,
]
# PyTorch's receives only post an irecv; the wait happens inside the compute that needs the data.
_TORCH_NAMES = {
    kind: t.value + (" (posts irecv)" if kind in (Kind.RECV_ACTIVATION, Kind.RECV_GRAD) else "")
    for kind, t in TYPE_BY_KIND.items()
}


@dataclass
class EngineComparison:
    """One spec run by both engines (see the module docstring)."""

    explorer: PipelineRunResult
    torch: TorchRunResult

    @property
    def losses_bitwise_equal(self) -> Optional[bool]:
        """Every loss of every iteration and every final gradient identical across the engines."""
        if self.explorer.digest is None or self.torch.digest is None:
            return None
        return self.explorer.digest == self.torch.digest

    @property
    def passed(self) -> bool:
        """Both engines ran and matched the reference (ours bitwise, PyTorch's within tolerance)."""
        return explorer_passed(self.explorer) and torch_passed(self.torch)

    def makespans_ms(self) -> dict[str, float]:
        return {
            "explorer": makespan(last_iteration(self.explorer.records)) * 1e3,
            "torch": self.torch.makespan() * 1e3,
        }

    def kind_times(self) -> list[dict]:
        """Per instruction kind: count, mean and median milliseconds on each engine (last iteration)."""
        ours: dict[Kind, list[float]] = {}
        for r in last_iteration(self.explorer.records):
            ours.setdefault(record_kind(r), []).append((r["end"] - r["start"]) * 1e3)
        theirs: dict[Kind, list[dict]] = {}
        for r in self.torch.iteration_records():
            theirs.setdefault(KIND_BY_CODE[r["kind"]], []).append(r)
        rows = []
        for kind in _ORDER:
            if kind not in ours and kind not in theirs:
                continue
            a, b = ours.get(kind, []), [(r["end"] - r["start"]) * 1e3 for r in theirs.get(kind, [])]
            waits = [r["wait"] * 1e3 for r in theirs.get(kind, [])]
            rows.append(
                {
                    "kind": kind.code,
                    "explorer": kind.deepspeed_name,
                    "torch": _TORCH_NAMES.get(kind),
                    "explorer_n": len(a),
                    "explorer_mean_ms": _mean(a),
                    "explorer_median_ms": _median(a),
                    "torch_n": len(b),
                    "torch_mean_ms": _mean(b),
                    "torch_median_ms": _median(b),
                    "torch_wait_mean_ms": _mean(waits) if kind.is_compute else None,
                }
            )
        return rows

    def to_dict(self) -> dict:
        return {
            "losses_bitwise_equal_between_engines": self.losses_bitwise_equal,
            "explorer_losses": self.explorer.losses,
            "torch_losses": self.torch.losses,
            "makespan_ms": self.makespans_ms(),
            "kinds": self.kind_times(),
        }

    def table(self) -> str:
        """A text table of :meth:`kind_times` and the makespans."""
        head = (
            f"{'kind':<5} {'explorer':<16} {'n':>3} {'mean ms':>8} {'median':>7}  {'torch':<21} {'n':>3} "
            f"{'mean ms':>8} {'median':>7} {'wait':>7}"
        )
        lines = [head]
        for r in self.kind_times():
            lines.append(
                f"{r['kind']:<5} {r['explorer']:<16} {r['explorer_n']:>3} {_ms(r['explorer_mean_ms']):>8} "
                f"{_ms(r['explorer_median_ms']):>7}  {r['torch'] or '-':<21} {r['torch_n']:>3} "
                f"{_ms(r['torch_mean_ms']):>8} {_ms(r['torch_median_ms']):>7} {_ms(r['torch_wait_mean_ms']):>7}"
            )
        spans = self.makespans_ms()
        lines.append(
            f"makespan: explorer {spans['explorer']:.2f} ms, torch {spans['torch']:.2f} ms "
            f"(first instruction start to last end, last iteration, all ranks)"
        )
        lines.append(
            f"losses and gradients bitwise equal between engines: {self.losses_bitwise_equal}"
        )
        return "\n".join(lines)


def compare_engines(
    spec: RunSpec, folder: Union[None, str, Path] = None, *, order: OrderSource = "auto"
) -> EngineComparison:
    """Run ``spec`` on our engine, then on PyTorch's; ``folder`` gets ``explorer/`` and ``torch/`` run folders."""
    from explorer.pipeline.runtime.launch import run_pipeline

    base = Path(folder) if folder else None
    ours = run_pipeline(spec, base / "explorer" if base else None)
    theirs = run_torch_engine(spec, base / "torch" if base else None, order=order)
    return EngineComparison(ours, theirs)


def explorer_passed(result: PipelineRunResult) -> bool:
    """The explorer's (or DeepSpeed's) run finished and matched the reference bitwise."""
    return result.ok and bool(result.bitwise_equal_to_reference)


def torch_passed(result: TorchRunResult) -> bool:
    """PyTorch's run finished and matched the reference within tolerance."""
    return result.ok and bool(result.within_tolerance)


@dataclass
class ThreeEngines:
    """One spec run by the explorer's engine, PyTorch's and DeepSpeed's, one after the other."""

    explorer: PipelineRunResult
    torch: TorchRunResult
    deepspeed: PipelineRunResult

    @property
    def passed(self) -> bool:
        """Every engine ran and matched the reference."""
        return (
            explorer_passed(self.explorer)
            and torch_passed(self.torch)
            and explorer_passed(self.deepspeed)
        )


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


def _mean(values: list[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


__all__ = [
    "EngineComparison",
    "ThreeEngines",
    "compare_engines",
    "compare_three_engines",
    "explorer_passed",
    "run_deepspeed",
    "torch_passed",
]
