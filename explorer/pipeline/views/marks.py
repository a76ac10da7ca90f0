"""Where each finding sits on the instruction grid, in words.

Findings are pinned to a rank, a stage and a step; the grid's rows are stages, so this keys
them by ``(stage, step)`` (the text listing keys by rank). Every view that marks a cell reads
this one table, so a hazard is never outlined in one figure and missing from another.
"""

from __future__ import annotations

from typing import Protocol

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


__all__ = ["findings_by_cell", "finding_cell"]
