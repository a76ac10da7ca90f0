"""The environment ``torchrun`` gives its workers, for ranks started on this machine.

Every multi-rank engine starts its processes exactly as ``torchrun`` would (``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR=127.0.0.1``, a free
``MASTER_PORT``), so the same worker runs unchanged under a user's own ``torchrun`` on several
machines. ``PYTHONPATH`` carries the parent's ``sys.path`` so the children import the same
``explorer`` (and the user's modules) as the parent.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Mapping, Optional

__all__ = ["free_port", "process_alive", "process_state", "python_path", "rank_env"]


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def process_state(pid: int) -> Optional[str]:
    """The one-letter state ``/proc`` gives process ``pid`` (``R``, ``S``, ``T`` stopped by a
    signal, ``t`` stopped by a debugger, ``Z``...); None where there is no such process or no
    ``/proc`` (macOS)."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0].decode("ascii", "replace")
    except (OSError, ValueError, IndexError):
        return None


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
