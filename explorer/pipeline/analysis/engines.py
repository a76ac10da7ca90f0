"""Three engines' runs of one spec, side by side: losses, verdicts with their reasons, per-kind
mean times and makespans of each engine's last iteration.

Pure: it reads results the runtime made (:mod:`explorer.pipeline.runtime.engines` runs them);
the text is :func:`explorer.pipeline.printout.engines.side_by_side_table`.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING, Callable, Optional

from explorer.pipeline.schedules.instructions import KIND_BY_CODE
from explorer.pipeline.traces.trace import last_iteration, makespan, record_kind

if TYPE_CHECKING:
    from explorer.pipeline.runtime.torch_engine import TorchRunResult
    from explorer.pipeline.traces.result import PipelineRunResult


def side_by_side(ours: PipelineRunResult, torch_run: TorchRunResult, ds: PipelineRunResult) -> dict:
    """Losses, bitwise verdicts with their reasons, per-kind mean times and makespans of the three engines."""
    per = {
        "explorer": _kinds(last_iteration(ours.records), lambda r: record_kind(r).code),
        "torch": _kinds(torch_run.iteration_records(), lambda r: KIND_BY_CODE[r["kind"]].code),
        "deepspeed": _kinds(last_iteration(ds.records), lambda r: record_kind(r).code),
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
            "explorer": makespan(last_iteration(ours.records)) * 1e3 if ours.records else None,
            "torch": torch_run.makespan() * 1e3 if torch_run.records else None,
            "deepspeed": makespan(last_iteration(ds.records)) * 1e3 if ds.records else None,
        },
        "kinds": _kind_rows(per),
    }


def _kinds(records: list[dict], kind_of: Callable[[dict], str]) -> dict[str, list[float]]:
    """Milliseconds per instruction, by kind code."""
    out: dict[str, list[float]] = {}
    for r in records:
        out.setdefault(kind_of(r), []).append((r["end"] - r["start"]) * 1e3)
    return out


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


__all__ = ["side_by_side"]
