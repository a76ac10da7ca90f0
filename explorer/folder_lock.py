"""One run at a time in an output folder: an exclusive ``flock`` on ``run.lock``, held while it runs.

Every product that writes a run folder (``explorer run``, ``xla-run``) claims it here before it
sets an earlier run aside or writes a byte: two runs started into one ``--out`` once moved each
other's files and wrote into one message log, and both were then read as one clean run. The
kernel drops the lock when its holder dies, so a killed launcher never leaves the folder locked.
The file names the holder (``run <id>, pid <pid>``) for the refusal's words and for readers that
ask whether the run still goes on (:func:`lock_text`, :func:`lock_held_by`); readers never lock.

Pure: ``os``, ``fcntl`` and ``/proc/locks``.
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
import uuid
from pathlib import Path
from typing import IO, Optional

from explorer.errors import InputError

#: The lock file's name in a run folder.
LOCK = "run.lock"


def new_run_id() -> str:
    """A short unique id for a run: the time it started (sortable) and a random part."""
    return time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]


class FolderLock:
    """An exclusive claim on a run folder, held by its launcher for the whole run."""

    def __init__(self, fh: IO[str]) -> None:
        self._fh = fh

    @staticmethod
    def claim(folder: Path, run_id: str, option: str = "--out") -> "FolderLock":
        """Lock ``folder`` for run ``run_id``; a folder another run holds is one InputError."""
        folder = Path(folder)
        fh = _open_lock(folder / LOCK, option)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            fh.close()
            raise InputError(
                f"{folder} is in use by another run ({holder}): give another {option} folder, or "
                "wait for that run to end"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"run {run_id}, pid {os.getpid()}")
        fh.flush()
        return FolderLock(fh)

    def release(self) -> None:
        """Let the folder go (another run may start there); a second call does nothing."""
        if self._fh is not None and not self._fh.closed:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()


def _open_lock(path: Path, option: str) -> IO[str]:
    """``run.lock`` opened to be locked and written: a regular file, never through a link (a
    symlink put there would have its target truncated) nor a FIFO or folder (one line, exit 2,
    where ``open`` raised a traceback or blocked)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise InputError(
            f"{path} cannot be the run's lock ({exc.strerror or exc}: a link, a folder or "
            f"unwritable?): remove it, or give another {option} folder"
        ) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InputError(
            f"{path} is not a regular file, so it cannot be the run's lock: remove it, or give "
            f"another {option} folder"
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a+", encoding="utf-8")


def lock_text(path: Path) -> Optional[str]:
    """What ``run.lock`` says (one short line), or None when it is not a regular file: a FIFO
    put in its place must not block every reader, nor a huge file fill its memory."""
    try:
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)) as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            return fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return None


def lock_held_by(path: Path, pid: int) -> Optional[bool]:
    """Whether ``pid`` holds a lock on ``path`` by the kernel's own list (``/proc/locks``); None
    where that list cannot be read. The inode is compared, not the device: on an overlay file
    system the lock names the lower file system's device."""
    try:
        inode = path.stat().st_ino
        table = Path("/proc/locks").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in table.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->":  # a waiter, not a holder
            continue
        if fields[4] == str(pid) and fields[5].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


__all__ = ["LOCK", "FolderLock", "lock_held_by", "lock_text", "new_run_id"]
