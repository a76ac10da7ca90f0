"""A run folder holds one run: an id every record repeats, a lock while it runs, older runs set aside.

Without this, two ``explorer run`` into one ``--out`` both appended to ``rank<R>.jsonl`` and
overwrote ``spec.json`` (one run executed the other's schedule and still reported ok), and a
reused folder leaked the previous run's losses and ``done`` lines into the new result. So:

- the launcher takes an exclusive ``flock`` on ``run.lock`` for the whole run (the kernel drops
  it if the launcher dies); a second launcher is refused with the holder's run id and pid;
- files of an earlier run (``spec.json``, ``rank*.jsonl``, ``rank*.log``, ``result.json``,
  ``exit_codes.json``) are moved into ``previous/<its run id>/`` before the new run writes;
- every line and the result carry ``"run": <id>``, and the collector reads only its own run's.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Optional

from explorer.errors import InputError

LOCK = "run.lock"
#: Names a run writes into its folder (moved aside together when the folder is reused).
_RUN_FILE = re.compile(
    r"(spec\.json(\.\d+)?|result\.json(\.tmp)?|exit_codes\.json(\.tmp)?|rank\d+\.(jsonl|log))"
)


def refuse_writing_over_the_run(output: str, folder: str, option: str) -> None:
    """An output file (``--trace``, ``--html``) must not be one of the run's own files: written
    over ``rank0.jsonl``, it left a folder whose every later read described half a run."""
    out, home = Path(output).resolve(), Path(folder).resolve()
    inside = out.parent == home and (_RUN_FILE.fullmatch(out.name) or out.name == LOCK)
    if inside or home / "previous" in out.parents:
        raise InputError(
            f"{option} {output} would overwrite a file of the run folder {folder} (the run's own "
            "records): write it to another name or folder"
        )


def new_run_id() -> str:
    """A short unique id: the time it started (sortable) and a random part."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


class RunFolderLock:
    """An exclusive claim on a run folder, held by the launcher while its ranks run."""

    def __init__(self, fh) -> None:
        self._fh = fh

    @staticmethod
    def claim(folder: Path, run_id: str) -> "RunFolderLock":
        """Lock ``folder`` for ``run_id`` and set any earlier run's files aside; refuse a folder in use."""
        folder = Path(folder)
        fh = open(folder / LOCK, "a+", encoding="utf-8")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            fh.close()
            raise InputError(
                f"{folder} is in use by another run ({holder}): give another --out folder, or wait "
                "for that run to end"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"run {run_id}, pid {os.getpid()}")
        fh.flush()
        set_aside(folder)
        return RunFolderLock(fh)

    def release(self) -> None:
        if self._fh is not None and not self._fh.closed:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()


def launcher_running(folder: Path, run_id: str) -> Optional[int]:
    """The pid of the launcher of run ``run_id`` when it still runs (``run.lock`` names it, and
    that process is alive and an explorer one), else None. Read, never locked: a reader must
    not hold the lock a new run would ask for."""
    try:
        said = (Path(folder) / LOCK).read_text(encoding="utf-8")
    except OSError:
        return None
    m = re.fullmatch(r"run (\S+), pid (\d+)", said.strip())
    if m is None or m.group(1) != run_id:
        return None
    pid = int(m.group(2))
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # gone (or no /proc here: then not known to run)
    return pid if b"explorer" in command else None  # a pid since given to another program


def set_aside(folder: Path) -> Optional[Path]:
    """Move an earlier run's files into ``previous/<run id>/``; returns where, or None when there were none."""
    folder = Path(folder)
    stale = [p for p in folder.iterdir() if p.is_file() and _RUN_FILE.fullmatch(p.name)]
    if not stale:
        return None
    try:
        old = json.loads((folder / "spec.json").read_text()).get("run_id") or ""
    except (OSError, ValueError, AttributeError):
        old = ""
    name = re.sub(r"[^\w.\-]", "_", old)[:64] or time.strftime(
        "run-%Y%m%d-%H%M%S", time.localtime(max(p.stat().st_mtime for p in stale))
    )
    dest = folder / "previous" / name
    while dest.exists():
        dest = dest.with_name(dest.name + "+")
    dest.mkdir(parents=True)
    for p in stale:
        p.replace(dest / p.name)
    return dest


__all__ = ["LOCK", "RunFolderLock", "new_run_id", "set_aside"]
