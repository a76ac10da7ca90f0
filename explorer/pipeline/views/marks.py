"""Where each finding sits on the instruction grid, in words.

Findings are pinned to a rank, a stage and a step; the grid's rows are stages, so this keys
them by ``(stage, step)`` (the text listing keys by rank). Every view that marks a cell reads
this one table, so a hazard is never outlined in one figure and missing from another.
"""

from __future__ import annotations

from typing import Protocol, Sequence

from explorer.pipeline.analysis.check import Report
from explorer.pipeline.printout.listing import findings_by_cell as _by_cell


def findings_by_cell(report: Report) -> dict[tuple[int, int], list[str]]:
    """``(stage, step) -> ["HAZARD: ...", ...]`` for every finding of ``report``."""
    return _by_cell(report, key="stage")


class Pinned(Protocol):
    """A finding record that points at a cell (every record of :mod:`~explorer.pipeline.analysis.findings` but the bubble)."""

    @property
    def stage(self) -> int: ...

    @property
    def step(self) -> int: ...


def finding_cell(finding: Pinned) -> tuple[int, int]:
    """The ``(stage, step)`` cell a finding record points at (deadlocks: the first stuck rank)."""
    return int(finding.stage), int(finding.step)


def contract_marks(violations: Sequence[dict]) -> dict[tuple[int, int], list[str]]:
    """``(stage, step) -> ["P2P CONTRACT (kind): ...", ...]``: each message that broke the P2P
    contract (``ContractViolation.to_dict()``, as a run's ``contract`` lists them) at its
    receive's cell, worded like a finding so the grid marks it like a hazard."""
    out: dict[tuple[int, int], list[str]] = {}
    for v in violations:
        out.setdefault((int(v["stage"]), int(v["step"])), []).append(
            f"P2P CONTRACT ({v['kind']}): {v['message']}; fix: {v['hint']}"
        )
    return out


__all__ = ["contract_marks", "findings_by_cell", "finding_cell"]
