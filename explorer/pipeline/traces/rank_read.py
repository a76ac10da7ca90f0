"""What reading one rank file of a job gives, whatever the file's format.

Shared by the job reader (:mod:`.job`) and each format's rank reader (the explorer's rank
files there, profiler traces in :mod:`.profiler.columns`), so neither imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Unread:
    """A rank the job should have and that could not be read in full, or (``ended``) that was
    read in full but did not run to its end (it failed, or wrote no end): why, and what was kept."""

    rank: int
    why: str
    kept: int = 0
    ended: bool = False

    def sentence(self) -> str:
        kept = f" (kept its {self.kept} instructions before that)" if self.kept else ""
        if self.ended:
            kept = f" ({self.kept} instructions read)" if self.kept else ""
        return f"rank {self.rank}: {self.why}{kept}"


#: A rank file read: its instruction columns (None: nothing usable), what was wrong, its ``unix``
#: start (NaN: none).
RankRead = tuple[Optional[dict[str, np.ndarray]], Optional[Unread], float]

__all__ = ["RankRead", "Unread"]
