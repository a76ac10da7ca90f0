"""Row labels for the schedule views: a stage is not a rank once ranks hold several stages.

DESIGN.md asks to say so explicitly, so with interleaving every stage row names its rank and
every rank row names its stages; without interleaving a row is simply "stage s".
"""

from __future__ import annotations

from explorer.pipeline.schedules.schedule import Schedule


def stage_labels(schedule: Schedule) -> list[str]:
    """One label per stage row: ``stage 3`` or, with virtual stages, ``stage 5 (rank 1)``."""
    if schedule.num_chunks == 1:
        return [f"stage {s}" for s in range(schedule.num_stages)]
    return [f"stage {s} (rank {r})" for s, r in enumerate(schedule.stage_to_rank)]


def rank_labels(schedule: Schedule) -> list[str]:
    """One label per rank row (time lines are per process): ``stage 3`` or ``rank 1: stages 1, 5``."""
    if schedule.num_chunks == 1:
        return [f"stage {schedule.stages_of_rank(r)[0]}" for r in range(schedule.num_ranks)]
    return [
        f"rank {r}: stages {', '.join(map(str, schedule.stages_of_rank(r)))}"
        for r in range(schedule.num_ranks)
    ]


def row_height(rows: int, per_row: float = 28.0, extra: float = 140.0, cap: float = 900.0) -> int:
    """Figure height that keeps rows readable up to a cap (64 stages still fit a screen)."""
    return int(min(cap, max(260.0, rows * per_row + extra)))


__all__ = ["stage_labels", "rank_labels", "row_height"]
