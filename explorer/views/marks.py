"""Where each finding sits on the instruction grid, in words.

Findings are pinned to a rank, a stage and a step; the grid's rows are stages, so this keys
them by ``(stage, step)`` (the text listing keys by rank). Every view that marks a cell reads
this one table, so a hazard is never outlined in one figure and missing from another.
"""

from __future__ import annotations

from collections import defaultdict

from explorer.analysis.check import Report


def findings_by_cell(report: Report) -> dict[tuple[int, int], list[str]]:
    """``(stage, step) -> ["HAZARD: ...", ...]`` for every finding of ``report``."""
    cells: dict[tuple[int, int], list[str]] = defaultdict(list)
    f = report.findings
    for h in f.hazards:
        cells[(h.at.stage, h.at.step)].append(f"HAZARD: {h.cause}")
    for u in f.unmatched:
        cells[(u.at.stage, u.at.step)].append(f"UNMATCHED: {u.reason}")
    for m in f.mismatched:
        cells[(m.recv.stage, m.recv.step)].append(f"MISMATCH: {m.describe()}")
    if f.deadlock:
        for w in f.deadlock.stuck:
            cells[(w.at.stage, w.at.step)].append(f"DEADLOCK: {w.describe()}")
    return dict(cells)


def finding_cell(finding: object) -> tuple[int, int]:
    """The ``(stage, step)`` cell a finding record points at (deadlocks: the first stuck rank)."""
    return int(finding.stage), int(finding.step)  # type: ignore[attr-defined]
