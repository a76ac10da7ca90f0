"""Register XLA artifacts (dumps, save file, debug log, metrics report) with ``explorer read``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from explorer.traces.detect import Detector, register
from explorer.traces.xla.artifacts import find_artifacts


def _recognise(path: Path) -> Optional[str]:
    found = find_artifacts(path)
    return f"XLA artifacts: {found.describe()}" if found.kinds else None


register(
    Detector(
        "xla",
        "what a PyTorch/XLA run wrote: --xla_dump_to dumps, XLA_SAVE_TENSORS_FILE, "
        "PT_XLA_DEBUG_FILE, metrics_report() text (a folder or one file)",
        _recognise,
        "explorer.commands.read_xla:read",
    )
)


__all__: list[str] = []  # registers the xla kind with explorer read; nothing to import
