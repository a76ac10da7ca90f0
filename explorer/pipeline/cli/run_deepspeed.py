"""``explorer run --engine deepspeed|all``: DeepSpeed's own engine, alone or beside the other two.

``deepspeed``: the JSON keeps ``explorer run``'s contract (``ok``, ``losses``,
``bitwise_equal_to_reference``, ``failure``, ``instructions``) and adds ``engine`` and
``deepspeed_version``; the failure is the first in time across ranks, with DeepSpeed's
exception, the tail of its traceback and the later failures as ``consequences``.

``all``: the explorer's engine, PyTorch's and DeepSpeed's on the same spec, one after the
other, side by side: losses bitwise between engines where they can agree (the explorer's and
DeepSpeed's scale each loss by 1/M before its backward; PyTorch's divides the summed gradients
after the last backward, bitwise only when M is a power of two), per-kind times and makespans.

Exit codes: 0 when every engine ran and matched the reference, 1 otherwise, 2 on bad input
(including a DeepSpeed release without the internals the explorer needs).
"""

from __future__ import annotations

import argparse
import json
import statistics
from typing import Optional

from explorer.errors import InputError
from explorer.inputs import write_text


def report_deepspeed(spec, args: argparse.Namespace) -> int:
    """Run ``spec`` on DeepSpeed's engine, print the result, return the exit code."""
    from explorer.pipeline.runtime.deepspeed.engine import run_deepspeed_engine

    result = run_deepspeed_engine(spec, args.out)
    _refuse_unsupported(result)
    doc = deepspeed_doc(result)
    print(json.dumps(doc) if args.json else deepspeed_line(result), flush=True)
    if args.trace:
        write_text(args.trace, json.dumps(result.chrome_trace()), "--trace")
    return 0 if result.ok and result.bitwise_equal_to_reference else 1


def deepspeed_doc(result) -> dict:
    return {
        **result.to_dict(),
        "engine": "deepspeed",
        "deepspeed_version": result.details.get("deepspeed_version"),
        "run_folder": str(result.folder) if result.folder else None,
    }


def deepspeed_line(result) -> str:
    version = result.details.get("deepspeed_version")
    f = result.failure.to_dict() if result.failure else None
    if f:
        where = f"{result.failure.where()}: " if f.get("instruction") else ""
        tail = "\n".join(
            f"    {line}" for line in (f.get("traceback_tail") or "").splitlines()[-2:]
        )
        later = f.get("consequences") or []
        then = "\n  then: " + "\n  then: ".join(later) if later else ""
        return f"DeepSpeed {version}: failed: {where}{f['message']}\n{tail}{then}".rstrip()
    verdict = "bitwise equal to" if result.bitwise_equal_to_reference else "DIFFERENT from"
    warning = result.loss_warning()
    return (
        f"DeepSpeed {version}: ok: {len(result.losses)} micro-batch losses and final gradients "
        f"{verdict} the reference (run folder {result.folder})"
    ) + (f"\n{warning}" if warning else "")


def _refuse_unsupported(result) -> None:
    """A DeepSpeed without the internals the explorer needs is bad input: its one line, exit 2."""
    f = result.failure
    if f is not None and f.exception_type == "UnsupportedDeepSpeed":
        raise InputError(f.message.split(": ", 1)[-1])


def report_all(spec, args: argparse.Namespace) -> int:
    """The three engines on ``spec``, one after the other, side by side."""
    from pathlib import Path

    from explorer.pipeline.runtime.deepspeed.engine import check_runnable, run_deepspeed_engine
    from explorer.pipeline.runtime.engines import compare_engines

    check_runnable(spec)  # before anything runs
    base = Path(args.out) if args.out else None
    both = compare_engines(spec, base, order=args.torch_order)
    ds = run_deepspeed_engine(spec, base / "deepspeed" if base else None)
    _refuse_unsupported(ds)
    ours, torch_run = both.explorer, both.torch
    side = side_by_side(ours, torch_run, ds)
    doc = {
        **ours.to_dict(),
        "engine": "all",
        "deepspeed_version": ds.details.get("deepspeed_version"),
        "torch_engine": torch_run.to_dict(),
        "deepspeed_engine": deepspeed_doc(ds),
        "comparison": side,
    }
    if args.html:
        write_overlays(args.html, spec.build_schedule(), ours, torch_run, ds)
    if args.json:
        print(json.dumps(doc), flush=True)
    else:
        print(table(side), flush=True)
    ok = all(
        [
            ours.ok,
            bool(ours.bitwise_equal_to_reference),
            torch_run.ok,
            bool(torch_run.within_tolerance),
            ds.ok,
            bool(ds.bitwise_equal_to_reference),
        ]
    )
    return 0 if ok else 1


def write_overlays(path: str, schedule, ours, torch_run, ds) -> None:
    """One offline page: each engine's last iteration overlaid on the simulation of ``schedule``.

    Each overlay re-costs the simulation from that engine's own measurement, so the three lanes
    say where each engine spent its time against the same plan.
    """
    from explorer import inputs
    from explorer.pipeline.analysis import check
    from explorer.pipeline.views.overlay import overlay_figure
    from explorer.ui.html import page

    report = check(schedule)
    sections: list = []
    for title, result in (
        ("The explorer's engine", ours),
        (f"PyTorch's _PipelineScheduleRuntime ({torch_run.torch_version})", torch_run),
        (f"DeepSpeed's PipelineEngine ({ds.details.get('deepspeed_version')})", ds),
    ):
        sections.append(f"<h2>{title}</h2>")
        trace = result.trace()
        if len(trace) == 0:
            sections.append(
                "<p>No instruction was measured: the engine did not run an iteration.</p>"
            )
        else:
            sections.append(overlay_figure(report, trace))
    inputs.write_text(path, page(f"Three engines on {schedule.name}", sections), "HTML report")


def side_by_side(ours, torch_run, ds) -> dict:
    """Losses, bitwise verdicts with their reasons, per-kind mean times and makespans of the three engines."""
    from explorer.pipeline.traces.trace import last_iteration, makespan, record_kind

    def kinds(records: list[dict], kind_of) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for r in records:
            out.setdefault(kind_of(r), []).append((r["end"] - r["start"]) * 1e3)
        return out

    from explorer.pipeline.schedules.instructions import KIND_BY_CODE

    per = {
        "explorer": kinds(last_iteration(ours.records), lambda r: record_kind(r).code),
        "torch": kinds(torch_run.iteration_records(), lambda r: KIND_BY_CODE[r["kind"]].code),
        "deepspeed": kinds(last_iteration(ds.records), lambda r: record_kind(r).code),
    }
    codes = sorted({k for v in per.values() for k in v})
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
        "why_torch_may_differ": (
            None
            if m and (m & (m - 1)) == 0
            else f"PyTorch divides summed gradients by M={m} after the last backward; "
            "the others scale each loss by 1/M first: not a power of two, so rounding differs"
        ),
        "failures": {
            "explorer": ours.failure.to_dict() if ours.failure else None,
            "torch": _as_dict(torch_run.failure),
            "deepspeed": ds.failure.to_dict() if ds.failure else None,
        },
        "makespan_ms": {
            "explorer": makespan(last_iteration(ours.records)) * 1e3 if ours.records else None,
            "torch": torch_run.makespan() * 1e3 if torch_run.records else None,
            "deepspeed": makespan(last_iteration(ds.records)) * 1e3 if ds.records else None,
        },
        "kinds": [
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
        ],
    }


def table(side: dict) -> str:
    """Text form of :func:`side_by_side`."""
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


def _as_dict(failure) -> Optional[dict]:
    if failure is None or isinstance(failure, dict):
        return failure
    return failure.to_dict()


def _mean(values: list[float]) -> Optional[float]:
    return statistics.fmean(values) if values else None


def _ms(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.3f}"


__all__ = [
    "deepspeed_doc",
    "deepspeed_line",
    "report_all",
    "report_deepspeed",
    "side_by_side",
    "write_overlays",
]
