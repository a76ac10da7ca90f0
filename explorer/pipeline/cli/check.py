"""``explorer check``: verdict on a schedule; exit 0 valid, 1 findings, 2 bad input.

With ``--sweep STAGES:MICROBATCHES`` it checks every size of the range on every core and
names the smallest failing size (:mod:`explorer.pipeline.analysis.sizes`).

With ``RUN_FOLDER`` (a folder ``explorer run --out``, ``--engine torch`` or
``explorer.instrument`` wrote) it checks what the run recorded instead: every P2P message
against the receive it met (:mod:`explorer.pipeline.analysis.contract`); exit 0 when every
message matched, 1 on a violation, 2 when the folder is not a run folder or its metadata is
broken or partial.
"""

from __future__ import annotations

import argparse
import json

from explorer import cli_options
from explorer.json_text import dumps_indented
from explorer.pipeline.analysis.check import Report
from explorer.pipeline.analysis.gradients import trains
from explorer.pipeline.analysis.memory import RankMemory, memory_over_time
from explorer.pipeline.analysis.torch_words import cycle_words
from explorer.pipeline.cli.schedule_options import (
    add_p2p_convention_options,
    add_schedule_options,
    emit,
    report_from_args,
)
from explorer.pipeline.cli.sweeping import (
    add_sweep_options,
    refuse_workers_without_sweep,
    sweep_from_args,
)
from explorer.pipeline.printout.listing import summary
from explorer.verdict import with_verdict


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "check",
        help="check a schedule for hazards, unmatched P2P and deadlocks",
        description="Check a schedule. Exit 0 when valid, 1 with findings, 2 on bad input.",
    )
    add_schedule_options(p)
    add_p2p_convention_options(p)
    add_sweep_options(p)
    p.add_argument(
        "run_folder",
        nargs="?",
        type=cli_options.given_path("a run folder, or leave RUN_FOLDER out to check a schedule"),
        metavar="RUN_FOLDER",
        help="check the P2P contract a recorded run left (explorer run --out DIR, --engine torch, "
        "explorer.instrument) instead of a schedule",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    refuse_workers_without_sweep(args)
    if args.run_folder is not None:
        return _run_folder(args)
    if args.sweep:
        sweep = sweep_from_args(args)
        code = 130 if sweep.interrupted else (0 if sweep.smallest_failing is None else 1)
        doc = with_verdict(sweep.to_dict(), code) if args.json else {}
        emit(json.dumps(doc, indent=1) + "\n" if args.json else sweep.describe() + "\n", None)
        return code
    report = report_from_args(args)
    words = cycle_words(report.schedule, report.findings.deadlock, report.matching.partner)
    memory = memory_over_time(report.schedule, report.timeline) if report.timeline else None
    if args.json:
        doc = report.to_dict()
        if args.stage is not None:
            _only_stage(doc, report, args.stage)
        if words:
            doc["deadlock_in_pytorch_words"] = words
        doc["memory"] = _memory_doc(memory)
        emit(dumps_indented(doc, indent=1) + "\n", None)
    else:
        emit("\n".join(_text_lines(report, words, memory, args.stage)) + "\n", None)
    return 0 if report.ok else 1


def _only_stage(doc: dict, report: Report, stage: int) -> None:
    """``--stage`` in the JSON: the finding lists keep that stage's entries, and say how many of
    the others they left out; ``ok`` and the deadlocks stay the whole schedule's. Each entry is
    kept by its finding's own ``stage`` (a mismatch's is its receive's), as the text filters, so
    both forms keep the same findings; the gradient invariant's are findings too."""
    left = 0
    f = report.findings
    lists = [
        (doc, "hazards", f.hazards),
        (doc, "unmatched", f.unmatched),
        (doc, "mismatched", f.mismatched),
        (doc["gradients"], "not_exactly_once", f.gradients),
    ]
    for holder, key, found in lists:
        entries = holder[key]
        if len(entries) != len(found):  # the document is the findings', one entry each
            raise AssertionError(f"{key}: {len(entries)} entries for {len(found)} findings")
        kept = [entry for entry, finding in zip(entries, found) if finding.stage == stage]
        left += len(entries) - len(kept)
        holder[key] = kept
    doc["stage"] = stage
    doc["findings_on_other_stages"] = left


def _run_folder(args: argparse.Namespace) -> int:
    """``explorer check RUN_FOLDER``: the recorded run's P2P contract (module docstring)."""
    from pathlib import Path

    from explorer.errors import InputError
    from explorer.inputs import check_plain_files
    from explorer.pipeline.runtime.run_folder import recorded_contract

    given = [o for o, v in (("--kind", args.kind), ("--from", args.from_class)) if v]
    if given or args.sweep:
        raise InputError(
            f"RUN_FOLDER is checked against the schedule it recorded; drop "
            f"{', '.join(given + (['--sweep'] if args.sweep else []))}"
        )
    # as read and doctor do: a FIFO in the folder (exit_codes.json, a rank's log) blocked for ever
    check_plain_files(str(args.run_folder), "")
    report = recorded_contract(Path(args.run_folder))
    if args.json:
        doc = {"kind": "pipeline-contract", "path": args.run_folder, **report.to_dict()}
        emit(dumps_indented(doc, indent=1) + "\n", None)
    else:
        emit("\n".join(report.describe()) + "\n", None)
    return 0 if report.ok else 1


def _text_lines(
    report: Report,
    words: str | None,
    memory: list[RankMemory] | None,
    stage: int | None = None,
) -> list[str]:
    """The summary (every finding), then memory peaks, then the gradient invariant's tally (or
    why it does not apply)."""
    f = report.findings
    lines = [summary(report, stage)] + ([words] if words else [])
    lines += [f"# {m.describe()}" for m in _peaks(memory)]
    if not trains(report.schedule):
        lines.append("# no weight gradients to count: a forward-only schedule trains nothing")
    elif f.gradients:
        lines.append(f"# {len(f.gradients)} (stage, micro-batch) weight gradients not exactly once")
    else:
        lines.append("# every weight gradient reaches the optimizer step exactly once")
    return lines


def _peaks(memory: list[RankMemory] | None) -> list[RankMemory]:
    """The rank with the highest peak first; at most four lines."""
    return sorted(memory or [], key=lambda m: (-m.peak, m.rank))[:4]


def _memory_doc(memory: list[RankMemory] | None) -> dict | None:
    if memory is None:
        return None
    top = max(memory, key=lambda m: (m.peak, -m.rank))
    return {
        "unit": "micro-batches (activations held + input buffers in use: received, or loaded on the first stage)",
        "time_unit": "ticks of the simulation",
        "peak": {
            "rank": top.rank,
            "value": top.peak,
            "time": top.peak_time,
            "after": top.peak_instruction,
        },
        "ranks": [m.to_dict() for m in memory],
    }


__all__ = ["register", "run"]
