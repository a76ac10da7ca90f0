"""XLA artifacts (dumps, save file, debug log, metrics report), as a kind ``explorer read`` recognises."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from explorer.detect import Detector
from explorer.xla.traces.artifacts import find_artifacts


def _recognise(path: Path) -> Optional[str]:
    found = find_artifacts(path)
    return f"XLA artifacts: {found.describe()}" if found.kinds else None


ARTIFACTS = Detector(
    "xla",
    "what a PyTorch/XLA run wrote: --xla_dump_to dumps, XLA_SAVE_TENSORS_FILE, "
    "PT_XLA_DEBUG_FILE, metrics_report() text (a folder or one file)",
    _recognise,
)

__all__ = ["ARTIFACTS"]
