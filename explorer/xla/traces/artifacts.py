"""Find what an XLA run left behind: dumps, a save file, a debug log, a metrics report.

A user's run on a TPU leaves some of four things, under names they chose: an
``--xla_dump_to`` folder (``module_NNNN.SyncTensorsGraph.K.before_optimizations.txt`` per
compile), an ``XLA_SAVE_TENSORS_FILE`` (torch_xla appends the device ordinal), a
``PT_XLA_DEBUG_FILE`` and the text of ``metrics_report()``. Names prove nothing, so each file is
recognised by its first kilobytes; only dump files are recognised by XLA's fixed naming. Pure
and cheap: no file is read whole here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from explorer.errors import InputError, excerpt
from explorer.xla.traces.metrics_report import looks_like_metrics
from explorer.xla.traces.records import PREVIOUS_DIR
from explorer.xla.traces.savefile import looks_like_save_file

__all__ = ["XlaArtifacts", "find_artifacts", "KINDS"]

#: The four kinds, in the words the report uses.
KINDS = {
    "dump": "--xla_dump_to HLO dumps",
    "save": "XLA_SAVE_TENSORS_FILE save file",
    "debug": "PT_XLA_DEBUG_FILE debug log (PT_XLA_DEBUG_LEVEL=2)",
    "metrics": "torch_xla.debug.metrics report",
}
_DUMP = re.compile(r"module_(\d+)\.[\w.\-]*before_optimizations\.txt$")
_DEBUG = re.compile(r"^(Compilation|Execution) Analysis: ", re.M)
_HEAD_BYTES = 4096
_MAX_FILES = 5000
_MAX_DEPTH = 3


@dataclass
class XlaArtifacts:
    """Paths found, by kind; ``dump_files`` in compile order (XLA numbers modules as it makes them)."""

    root: str
    dump_files: list[str] = field(default_factory=list)
    save_files: list[str] = field(default_factory=list)
    debug_files: list[str] = field(default_factory=list)
    metrics_files: list[str] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        """The kinds present, in :data:`KINDS` order."""
        have = {
            "dump": self.dump_files,
            "save": self.save_files,
            "debug": self.debug_files,
            "metrics": self.metrics_files,
        }
        return [k for k in KINDS if have[k]]

    def describe(self) -> str:
        return ", ".join(KINDS[k] for k in self.kinds) or "nothing"


def _head(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def kind_of_file(path: str) -> Optional[str]:
    """``dump``, ``save``, ``debug``, ``metrics`` or None, from the name (dumps) or the head."""
    if _DUMP.search(os.path.basename(path)):
        return "dump"
    if os.path.basename(path).startswith("module_"):
        return None  # XLA's other dump files (after optimizations, object code, ...)
    head = _head(path)
    if looks_like_save_file(head):
        return "save"
    if _DEBUG.search(head):
        return "debug"
    if looks_like_metrics(head):
        return "metrics"
    return None


def _files(root: Path) -> list[str]:
    out: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= _MAX_DEPTH:
            dirnames[:] = []
        if depth == 0 and PREVIOUS_DIR in dirnames:
            dirnames.remove(PREVIOUS_DIR)  # earlier runs xla-run set aside: not this folder's run
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if os.path.isfile(full) and not os.path.islink(full):
                out.append(full)
                if len(out) >= _MAX_FILES:
                    return out
    return out


def find_artifacts(path: Path) -> XlaArtifacts:
    """Everything of the four kinds at ``path`` (a file, or a folder searched 3 levels deep)."""
    found = XlaArtifacts(str(path))
    files = [str(path)] if path.is_file() else _files(path) if path.is_dir() else []
    for f in files:
        kind = kind_of_file(f)
        if kind is not None:
            getattr(found, f"{kind}_files").append(f)
    found.dump_files.sort(key=_dump_number)
    _one_dump_folder(found.dump_files)
    return found


def _one_dump_folder(dumps: list[str]) -> None:
    """The dumps of one run lie in the one folder ``--xla_dump_to`` named. Dumps in several
    folders are several runs' (a copy of another run's ``hlo_dump`` beside this one's): sorted
    by module number alone they were taken for this run's, and each graph was read from the
    other run's HLO without a word, exit 0."""
    folders = sorted({os.path.dirname(d) for d in dumps})
    if len(folders) > 1:
        shown = ", ".join(excerpt(f) for f in folders[:3]) + (", ..." if len(folders) > 3 else "")
        raise InputError(
            f"XLA module dumps lie in {len(folders)} folders ({shown}): the dumps of one run are "
            "in the one folder --xla_dump_to named; move the other run's dumps away, or read "
            "one run's folder"
        )


def _dump_number(path: str) -> int:
    """The module number in a dump's name (:func:`kind_of_file` called it a dump for it)."""
    m = _DUMP.search(os.path.basename(path))
    if m is None:
        raise ValueError(f"{path}: not an XLA module dump (module_<number>.<name>...)")
    return int(m.group(1))
