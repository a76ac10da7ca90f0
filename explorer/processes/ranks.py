"""The environment ``torchrun`` gives its workers, for ranks started on this machine.

Every multi-rank engine starts its processes exactly as ``torchrun`` would (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR=127.0.0.1``, a free
``MASTER_PORT``), so the same worker runs unchanged under a user's own ``torchrun`` on several
machines. ``PYTHONPATH`` carries the parent's ``sys.path`` so the children import the same
``explorer`` (and the user's modules) as the parent.
"""

from __future__ import annotations

import os
import random
import socket
import sys
from typing import Mapping, Optional

__all__ = [
    "free_port",
    "holds_open",
    "process_alive",
    "process_state",
    "python_path",
    "rank_env",
]


#: Where the kernel says its ephemeral ports are (Linux); elsewhere none are chosen below it.
_PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
#: How far below the ephemeral range a port is drawn from (and never below ``_LOWEST``).
_BELOW, _LOWEST = 12_000, 10_000


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now, and that nothing else on this machine
    will be handed before the rank that listens on it binds it (seconds later, after it has
    imported torch).

    A port from ``bind(("", 0))`` is an ephemeral one, the pool every outgoing connection and
    every other ``bind(0)`` (gloo's own listeners, another job's store) draw from: in that
    window another process can take it, and the job fails to start on a busy machine. So the
    port is drawn at random from below the ephemeral range, where the kernel hands out none,
    and checked free; where the range leaves no room below it, an ephemeral one as before."""
    low = _ephemeral_low()
    if low is not None and low - _BELOW >= _LOWEST:
        for port in random.sample(range(low - _BELOW, low), 64):
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ephemeral_low() -> Optional[int]:
    """The first port of the kernel's ephemeral range, None where it does not say."""
    try:
        with open(_PORT_RANGE) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def process_state(pid: int) -> Optional[str]:
    """The one-letter state ``/proc`` gives process ``pid`` (``R``, ``S``, ``T`` stopped by a
    signal, ``t`` stopped by a debugger, ``Z``...); None where there is no such process or no
    ``/proc`` (macOS)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0].decode("ascii", "replace")
    except (OSError, ValueError, IndexError):
        return None


def holds_open(pid: int, path: "os.PathLike[str] | str") -> Optional[bool]:
    """True when process ``pid`` holds the file at ``path`` open (the same file: device and
    inode, so a folder moved while its ranks write is still theirs), False when it does not or
    the file is not there, None where its open files cannot be read (another user's process, no
    ``/proc``).

    How a reader knows a live process is the rank *of this folder*: a ``cp -r`` of a live run
    names the original's pids in its rank files, and those processes write elsewhere."""
    try:
        want = os.stat(path)
    except OSError:
        return False
    try:
        fds = os.listdir(f"/proc/{int(pid)}/fd")
    except (OSError, ValueError):
        return None
    for fd in fds:
        try:
            got = os.stat(f"/proc/{int(pid)}/fd/{fd}")
        except OSError:  # closed since the listing, or not a file
            continue
        if (got.st_dev, got.st_ino) == (want.st_dev, want.st_ino):
            return True
    return False


def process_alive(pid: int) -> bool:
    """True while a process ``pid`` exists on this machine and is not a zombie.

    How a reader of a rank's trace knows its job ended when nothing said so (torchrun killed
    with its ranks): the ranks' ``start`` lines name their host and pid.
    """
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, ValueError, IndexError):
        try:
            os.kill(int(pid), 0)  # no /proc (macOS): ask the kernel
        except ProcessLookupError:
            return False
        except (OSError, ValueError):
            return True  # exists, not ours (EPERM), or unknowable: not said to be gone
        return True


def python_path() -> str:
    """The parent's import path as one ``PYTHONPATH`` value (cwd first, as ``python -m`` has it)."""
    return os.pathsep.join(
        p for p in [os.getcwd(), *sys.path, os.environ.get("PYTHONPATH", "")] if p
    )


def rank_env(
    rank: int,
    world: int,
    port: int,
    *,
    threads: Optional[int] = None,
    extra: Optional[Mapping[str, str]] = None,
) -> dict[str, str]:
    """This process's environment plus torchrun's variables for ``rank`` of ``world``.

    ``threads`` sets ``OMP_NUM_THREADS`` (None: keep the caller's, else a fair share of the
    cores), so ranks sharing a machine do not each take every core.
    """
    share = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // world))
    return {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "PYTHONPATH": python_path(),
        "OMP_NUM_THREADS": str(threads) if threads is not None else share,
        **(extra or {}),
    }
