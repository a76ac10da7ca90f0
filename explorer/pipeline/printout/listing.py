"""Per-rank listings in the seed's style: one step per line, findings marked on their line.

The lines are :mod:`explorer.pipeline.schedules.streams`' (the seed's ``pprint`` of
``list(schedule)``, or ``step 6: 2RA2b0 2SG0b0 2F2b0``); a finding adds ``  <-- HAZARD: ...``.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Optional

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.schedules.streams import stream_header, stream_lines

MARK = "  <-- "


def findings_by_cell(report: Report, key: str = "rank") -> dict[tuple[int, int], list[str]]:
    """``(rank or stage, step) -> ["HAZARD: ...", ...]`` for every finding of the report.

    Listings key by rank (a stream is a rank's); the plotly grid keys by stage (its rows).
    Both read this one table, so a finding is never marked in one view and missing in another.
    """
    if key not in ("rank", "stage"):
        raise ValueError(f"key must be 'rank' or 'stage', got {key!r}")
    cells: dict[tuple[int, int], list[str]] = defaultdict(list)

    def at(ref) -> tuple[int, int]:
        return (ref.rank if key == "rank" else ref.stage, ref.step)

    f = report.findings
    for h in f.hazards:
        cells[at(h.at)].append(f"HAZARD: {h.cause}")
    for u in f.unmatched:
        cells[at(u.at)].append(f"UNMATCHED: {u.reason}")
    for mm in f.mismatched:
        cells[at(mm.recv)].append(f"MISMATCH: {mm.describe()}")
    if f.deadlock:
        for w in f.deadlock.stuck:
            cells[at(w.at)].append(f"DEADLOCK: {w.describe()}")
    if f.communicators:
        c = f.communicators
        cells[(c.rank if key == "rank" else c.stage, c.step)].append(f"DEADLOCK: {c.describe()}")
    for g in f.gradients:
        cells[(g.rank if key == "rank" else g.stage, g.step)].append(f"GRADIENT: {g.describe()}")
    return dict(cells)


def rank_listing(report: Report, rank: int, cells: Optional[dict] = None) -> list[str]:
    """The lines for one rank's stream (header first), each finding marked on its line."""
    cells = findings_by_cell(report) if cells is None else cells
    lines = [stream_header(report.schedule, rank)]
    for t, body in enumerate(stream_lines(report.schedule, rank)):
        marks = cells.get((rank, t))
        lines.append(body + (MARK + " | ".join(marks) if marks else ""))
    return lines


def listing(report: Report, ranks: Optional[Iterable[int]] = None) -> str:
    """Listings of ``ranks`` (all by default), separated by blank lines, then a summary."""
    cells = findings_by_cell(report)
    chosen = list(range(report.schedule.num_ranks)) if ranks is None else list(ranks)
    blocks = ["\n".join(rank_listing(report, r, cells)) for r in chosen]
    return "\n\n".join(blocks) + "\n\n" + summary(report) + "\n"


def verdict_lines(report: Report) -> list[str]:
    """The summary's own lines, without the findings: verdict, buffers, bubble (a status line's words)."""
    lines = [f"verdict: {'valid' if report.ok else 'INVALID'} under {report.model} P2P"]
    lines.append(
        f"buffers allocated per stage: {list(report.buffers.allocated)}; needed: {list(report.buffers.needed)}"
    )
    if report.timeline:
        b = report.timeline.bubble
        ideal = (
            f"{b.of_ideal:.1%} of ideal compute time"
            if b.of_ideal is not None
            else "no ratio to ideal compute time (it is 0: nothing computes)"
        )
        lines.append(
            f"bubble: {b.of_total:.1%} of total time, {ideal} (makespan {b.makespan:g} ticks)"
        )
    return lines


def summary(report: Report, stage: Optional[int] = None) -> str:
    """A few lines in words: verdict, findings, buffers, bubble. With ``stage``, the findings
    of that stage (and every deadlock, which holds several), and how many are left out."""
    found = report.findings.all()
    deadlock = report.findings.deadlock  # it spans stages: shown for every one (as in the JSON)
    shown = (
        found
        if stage is None
        else [f for f in found if f is deadlock or getattr(f, "stage", stage) == stage]
    )
    head, *rest = verdict_lines(report)
    lines = [f"# {head}"]
    for finding in shown[:20]:
        lines.append(f"#   {finding.describe()}")
    if len(shown) > 20:
        lines.append(f"#   ... and {len(shown) - 20} more")
    if len(shown) < len(found):
        lines.append(
            f"#   ({len(found) - len(shown)} finding(s) on other stages than {stage}: "
            "drop --stage to list them)"
        )
    lines.extend(f"# {line}" for line in rest)
    return "\n".join(lines)


__all__ = ["MARK", "findings_by_cell", "rank_listing", "listing", "summary"]
