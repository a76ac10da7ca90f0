"""Find a job's ``TORCH_TRACE`` files (and profiler traces beside them): the kind ``explorer read`` recognises.

``TORCH_TRACE=DIR`` makes every process write ``DIR/dedicated_log_torch_trace_rank_N_*.log``
(no ``rank_N`` when it logged before ``init_process_group``; kept gzipped, ``.log.gz``, it is
read the same). A user points ``explorer read`` at that folder, or at a folder holding it and
the profiler's output, so files are looked for in the folder and two levels below. Detection is cheap: file names, and the first kilobytes
of one file to check it is a structured trace. Run folders (``spec.json``) are another kind
and are tried first; a folder of profiler traces alone is not this kind either.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from pathlib import Path
from typing import Optional

from explorer.compile.traces.profile import looks_like_profile
from explorer.detect import Detector
from explorer.errors import excerpt

#: A TORCH_TRACE log's name, gzipped too (how a recorded trace is kept).
_NAME = re.compile(r"^dedicated_log_torch_trace.*\.log(?:\.gz)?$")
_LINE = re.compile(rb"^[IWEVDF]\d{4} [\d:.]+\s+\d+ [^\]]*\] \{")
#: Folder levels searched below the path given, and the most entries looked at in all.
DEPTH = 2
MAX_ENTRIES = 20_000
#: Logs whose first bytes are looked at: one broken rank's log (the first, in a job of thousands)
#: does not hide the folder; the job reader names it.
SAMPLED = 8


def _walk(root: Path, depth: int = DEPTH) -> list[Path]:
    """Regular files at most ``depth`` levels below ``root`` (sorted; hidden folders skipped; bounded)."""
    found: list[Path] = []
    level, seen = [root], 0
    for _ in range(depth + 1):
        below: list[Path] = []
        for folder in level:
            try:
                entries = sorted(os.scandir(folder), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:
                    return found
                try:
                    if entry.is_file():
                        found.append(Path(entry.path))
                    elif entry.is_dir(follow_symlinks=False) and not entry.name.startswith("."):
                        below.append(Path(entry.path))
                except OSError:
                    continue
        level = below
    return found


def trace_files(path: Path) -> list[Path]:
    """The structured-trace files at ``path`` (itself, when it is one)."""
    if path.is_file():
        return [path] if _NAME.match(path.name) else []
    return [p for p in _walk(path) if _NAME.match(p.name)]


def profile_files(path: Path, depth: int = DEPTH) -> list[Path]:
    """Profiler traces (Chrome-trace JSON, maybe gzipped) in the folder ``path`` and below it."""
    if path.is_file():
        return []
    return [p for p in _walk(path, depth) if looks_like_profile(p)]


def _head(path: Path) -> Optional[bytes]:
    """The first kilobytes of a log (decompressed when gzipped); None when it cannot be read."""
    try:
        with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as fh:
            return fh.read(4096)
    except (OSError, EOFError, zlib.error):  # gzip's errors for a damaged stream, too
        return None


def _starts_like_a_trace(path: Path) -> bool:
    head = _head(path)
    return head is not None and (not head or bool(_LINE.match(head)))


def recognise(path: Path) -> Optional[str]:
    """Why ``path`` is a TORCH_TRACE file or folder, or None."""
    files = trace_files(path)
    if not any(_starts_like_a_trace(f) for f in files[:SAMPLED]):
        return None
    if path.is_file():
        return "a TORCH_TRACE file (Dynamo's structured trace, dedicated_log_torch_trace_*.log)"
    return f"a TORCH_TRACE folder: {len(files)} structured-trace file(s) (dedicated_log_torch_trace_*.log)"


def unreadable(path: Path) -> Optional[str]:
    """Why files named like TORCH_TRACE logs at ``path`` are not read as one, or None when
    there are none: without this the user heard only that the path is no artifact at all."""
    files = trace_files(path)
    if not files:
        return None
    first = files[0]
    others = f" (and {len(files) - 1} more so named)" if len(files) > 1 else ""
    head = _head(first)
    why = (
        "cannot be opened or decompressed"
        if head is None
        else "does not start with a structured-trace line (a glog prefix such as "
        "'V1124 09:59:29.548000 7965 file.py:249] ', then a JSON object)"
    )
    return (
        f"the TORCH_TRACE log {excerpt(str(first))}{others} could not be read: it {why}; "
        "give the logs TORCH_TRACE=DIR wrote, as it wrote them (gzipped or not)"
    )


TORCH_TRACE = Detector(
    "torch-trace",
    "a TORCH_TRACE=DIR folder of dedicated_log_torch_trace_*.log (or .log.gz), profiler "
    "traces beside it optional",
    recognise,
    unreadable,
)

__all__ = [
    "TORCH_TRACE",
    "DEPTH",
    "MAX_ENTRIES",
    "trace_files",
    "profile_files",
    "recognise",
    "unreadable",
]
