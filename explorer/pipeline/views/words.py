"""Text for many instructions at once: the compact form and the words, straight from columns.

The views label thousands of cells and bars on every slider move; making an ``Instruction``
object per row just to print it costs more than the rest of a re-render. These functions give
the same strings as ``str(instruction)`` (without the stage, which the row already says) and
``instruction.describe()``, from the schedule's columns.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule

_CODES = [k.code for k in Kind]
_NAMES = [k.deepspeed_name for k in Kind]


def short_texts(schedule: Schedule, rows: Sequence[int] | np.ndarray) -> list[str]:
    """``RA2b0``-style text of each row: code, micro-batch, ``b`` + buffer (stage left out)."""
    rows = np.asarray(rows, dtype=np.int64)
    return [
        f"{_CODES[k]}{m if m >= 0 else ''}{f'b{b}' if b >= 0 else ''}"
        for k, m, b in zip(
            schedule.kind[rows].tolist(),
            schedule.microbatch[rows].tolist(),
            schedule.buffer[rows].tolist(),
        )
    ]


def described(schedule: Schedule, rows: Sequence[int] | np.ndarray) -> list[str]:
    """``SendGrad of micro-batch 0 (buffer 0) on stage 2`` for each row."""
    rows = np.asarray(rows, dtype=np.int64)
    out = []
    for k, m, b, s in zip(
        schedule.kind[rows].tolist(),
        schedule.microbatch[rows].tolist(),
        schedule.buffer[rows].tolist(),
        schedule.stage[rows].tolist(),
    ):
        text = _NAMES[k]
        if m >= 0:
            text += f" of micro-batch {m}"
        if b >= 0:
            text += f" (buffer {b})"
        out.append(f"{text} on stage {s}")
    return out


__all__ = ["short_texts", "described"]
