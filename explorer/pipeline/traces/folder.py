"""A run folder holds one run: an id every record repeats, a lock while it runs, older runs set aside.

Without this, two ``explorer run`` into one ``--out`` both appended to ``rank<R>.jsonl`` and
overwrote ``spec.json`` (one run executed the other's schedule and still reported ok), and a
reused folder leaked the previous run's losses and ``done`` lines into the new result. So:

- the launcher takes an exclusive ``flock`` on ``run.lock`` for the whole run (the kernel drops
  it if the launcher dies); a second launcher is refused with the holder's run id and pid;
- files of an earlier run (``spec.json``, ``rank*.jsonl``, ``rank*.log``, ``result.json``,
  ``exit_codes.json``, and PyTorch's engine's ``torch_*`` and ``actions.json``) are moved into
  ``previous/<its run id>/`` before the new run writes;
- every line and the result carry ``"run": <id>``, and the collector reads only its own run's.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Optional

from explorer.errors import InputError
from explorer.folder_lock import LOCK, FolderLock, lock_held_by, lock_text, new_run_id

#: Names a run writes into its folder (moved aside together when the folder is reused).
_RUN_FILE = re.compile(
    r"(spec\.json(\.\d+)?|result\.json(\.tmp)?|exit_codes\.json(\.tmp)?|rank\d+\.(jsonl|log)"
    # PyTorch's engine (--engine torch): its order, its ranks' lines and traces, its result
    r"|actions\.json|torch_order\.json|torch_result\.json(\.tmp)?|torch_rank\d+\.(jsonl|json|log))"
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


class RunFolderLock:
    """An exclusive claim on a run folder, held by the launcher while its ranks run
    (:class:`explorer.folder_lock.FolderLock`), with an earlier run's files set aside."""

    def __init__(self, lock: FolderLock) -> None:
        self._lock = lock

    @staticmethod
    def claim(folder: Path, run_id: str) -> "RunFolderLock":
        """Lock ``folder`` for ``run_id`` and set any earlier run's files aside; refuse a folder in use."""
        lock = FolderLock.claim(Path(folder), run_id)
        try:
            set_aside(Path(folder))
        except BaseException:  # the folder is let go: a refused run must not keep it locked
            lock.release()
            raise
        return RunFolderLock(lock)

    def release(self) -> None:
        self._lock.release()


def launcher_running(folder: Path, run_id: str) -> Optional[int]:
    """The pid of the launcher of run ``run_id`` while it still holds ``run.lock`` (the file
    names it, and the kernel lists that pid's lock on that file), else None.

    Read, never locked: a reader must not hold the lock a new run would ask for. The lock, not
    the pid alone, is the test: a notebook kernel or a test process that launched a run lives on
    after it, and a pid may since have gone to another program. Where ``/proc/locks`` cannot be
    read, a live process whose command line says explorer is taken as the holder."""
    path = Path(folder) / LOCK
    said = lock_text(path)
    if said is None:
        return None
    m = re.fullmatch(r"run (\S+), pid (\d+)", said.strip())
    if m is None or m.group(1) != run_id:
        return None
    pid = int(m.group(2))
    held = lock_held_by(path, pid)
    if held is not None:
        return pid if held else None
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None  # gone (or no /proc here: then not known to run)
    return pid if b"explorer" in command else None  # a pid since given to another program


def of_torch_engine(folder: Path) -> bool:
    """Whether ``folder`` is a run of PyTorch's engine (``--engine torch``), or one starting:
    its ``actions.json``, its order or its ranks' ``torch_rank<R>`` files. It holds
    ``spec.json`` and ``run.lock`` as the explorer's own runs do, but no ``rank<R>.jsonl`` ever:
    it must not be read as an explorer run whose ranks never wrote."""
    folder = Path(folder)
    return (
        (folder / "actions.json").exists()
        or (folder / "torch_order.json").exists()
        or any(folder.glob("torch_rank*"))
    )


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


__all__ = ["LOCK", "RunFolderLock", "new_run_id", "of_torch_engine", "set_aside"]
