"""Engines' runs of one spec compared: ours beside PyTorch's (:class:`EngineComparison`), or
beside PyTorch's and DeepSpeed's (:class:`ThreeEngines`, :func:`side_by_side`): losses, verdicts
with their reasons, per-kind times and makespans of each engine's last iteration.

Pure: it reads results the runtime made (:mod:`explorer.pipeline.runtime.engines` runs them);
the words are :mod:`explorer.pipeline.printout.engines`'. The kinds mean different things at
the edges, and the table says so rather than hide it: our receive blocks until the data is
there, PyTorch's only posts an ``irecv`` and waits inside the ``F``/``B`` that needs the data
(the ``torch wait`` column).

Each result says whether it *passed*: it ran and matched the reference (ours and DeepSpeed's
bitwise; PyTorch's within rtol 1e-5 because it averages gradients after summing them, see
:mod:`explorer.pipeline.runtime.torch_engine`). That is the verdict ``explorer run --engine ...``
exits with.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from explorer.pipeline.analysis.measured import makespan, milliseconds_by_kind
from explorer.pipeline.schedules.instructions import KIND_BY_CODE, Kind
from explorer.pipeline.schedules.torch_actions import TYPE_BY_KIND
from explorer.pipeline.traces.result import PipelineRunResult

if TYPE_CHECKING:
    from explorer.pipeline.runtime.torch_engine import TorchRunResult

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
            "explorer": makespan(self.explorer.trace()) * 1e3,
            "torch": self.torch.makespan() * 1e3,
        }

    def kind_times(self) -> list[dict]:
        """Per instruction kind: count, mean and median milliseconds on each engine (last iteration)."""
        ours = {
            KIND_BY_CODE[code]: ms
            for code, ms in milliseconds_by_kind(self.explorer.trace()).items()
        }
        last = self.torch.trace()
        theirs = {KIND_BY_CODE[code]: ms for code, ms in milliseconds_by_kind(last).items()}
        blocked: dict[Kind, list[float]] = {}
        for k, w in zip(last.kind.tolist(), last.wait.tolist()):
            blocked.setdefault(Kind(k), []).append(w * 1e3)
        rows = []
        for kind in _ORDER:
            if kind not in ours and kind not in theirs:
                continue
            a, b = ours.get(kind, []), theirs.get(kind, [])
            waits = blocked.get(kind, [])
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


def explorer_passed(result: PipelineRunResult) -> bool:
    """The explorer's (or DeepSpeed's) run finished and matched the reference bitwise."""
    return result.ok and bool(result.bitwise_equal_to_reference)


def torch_passed(result: TorchRunResult) -> bool:
    """PyTorch's run finished and matched the reference within tolerance."""
    return result.ok and bool(result.within_tolerance)


def torch_off_by_microbatches(result: TorchRunResult) -> Optional[str]:
    """Why PyTorch's run is off the reference, when its gradients say so: exactly M times the
    reference's (``grad_scale_to_reference``) means they were summed over the M micro-batches
    and never divided. With a split backward that is torch 2.9.0's runtime itself: its
    ``BACKWARD_WEIGHT`` branch never calls ``scale_grads`` after a stage's last weight pass
    (the full-backward branch does), fixed upstream in pytorch/pytorch#164777. A "no" with
    its cause, so a correct schedule's failed cross-check is not read as the schedule's fault.
    """
    actions = [a for row in (result.order.actions or {}).values() for a in row]
    m = len({a.split("F", 1)[1] for a in actions if "F" in a})
    scale = result.grad_scale_to_reference
    if result.within_tolerance or scale is None or m < 2 or abs(scale - m) > 1e-3 * m:
        return None
    said = f"PyTorch's gradients are {m}x the reference's: summed over the {m} micro-batches, never divided"
    if any("W" in a for a in actions):
        return (
            f"{said}. torch {result.torch_version}'s runtime divides a stage's gradients after its "
            "last full backward but not after its last weight pass (BACKWARD_WEIGHT): a bug of "
            "PyTorch fixed upstream in pytorch/pytorch#164777, not of this schedule"
        )
    return said


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


def side_by_side(ours: PipelineRunResult, torch_run: TorchRunResult, ds: PipelineRunResult) -> dict:
    """Losses, bitwise verdicts with their reasons, per-kind mean times and makespans of the three engines."""
    per = {
        "explorer": milliseconds_by_kind(ours.trace()),
        "torch": milliseconds_by_kind(torch_run.trace()),
        "deepspeed": milliseconds_by_kind(ds.trace()),
    }
    m = len(ours.losses) or len(ds.losses)
    return {
        "losses": {"explorer": ours.losses, "torch": torch_run.losses, "deepspeed": ds.losses},
        "bitwise_equal_to_reference": {
            "explorer": ours.bitwise_equal_to_reference,
            "torch": torch_run.bitwise_equal_to_reference,
            "deepspeed": ds.bitwise_equal_to_reference,
        },
        "explorer_and_deepspeed_bitwise_equal": (
            None if ours.digest is None or ds.digest is None else ours.digest == ds.digest
        ),
        "why_torch_may_differ": _why_torch_may_differ(m),
        "failures": {
            "explorer": ours.failure.to_dict() if ours.failure else None,
            "torch": torch_run.failure.to_dict() if torch_run.failure else None,
            "deepspeed": ds.failure.to_dict() if ds.failure else None,
        },
        "makespan_ms": {
            "explorer": makespan(ours.trace()) * 1e3 if ours.records else None,
            "torch": torch_run.makespan() * 1e3 if torch_run.records else None,
            "deepspeed": makespan(ds.trace()) * 1e3 if ds.records else None,
        },
        "kinds": _kind_rows(per),
    }


def _kind_rows(per: dict[str, dict[str, list[float]]]) -> list[dict]:
    """One row per kind any engine ran: each engine's count and mean milliseconds."""
    codes = sorted({k for v in per.values() for k in v})
    return [
        {
            "kind": code,
            **{
                f"{engine}_{stat}": value
                for engine, rows in per.items()
                for stat, value in (
                    ("n", len(rows.get(code, []))),
                    ("mean_ms", _mean(rows.get(code, []))),
                )
            },
        }
        for code in codes
    ]


def _why_torch_may_differ(m: int) -> Optional[str]:
    """PyTorch's losses agree bitwise with the others' only when M is a power of two."""
    if m and (m & (m - 1)) == 0:
        return None
    return (
        f"PyTorch divides summed gradients by M={m} after the last backward; "
        "the others scale each loss by 1/M first: not a power of two, so rounding differs"
    )


def _mean(values: list[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def _median(values: list[float]) -> Optional[float]:
    return statistics.median(values) if values else None


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


__all__ = [
    "EngineComparison",
    "ThreeEngines",
    "explorer_passed",
    "side_by_side",
    "torch_off_by_microbatches",
    "torch_passed",
]
