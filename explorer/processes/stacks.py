"""Live Python stacks of a running job's processes, without stopping them: ``py-spy dump``.

Only the processes the user named, and the ones below them, are ever read: :func:`tree` walks
``/proc`` down from the target, never sideways. Each process is dumped with
``py-spy dump --pid P --locals --nonblocking --json``: non-blocking, so the job is not paused
while its memory is read (a frame may be read mid-change; the doctor reads a handful of
locals and says what it could not read). The dumps of all ranks run side by side, so a
diagnosis of 8 ranks costs about one dump's time.

Where the kernel refuses to let us read another process (Yama's ``ptrace_scope``, a container
without ``CAP_SYS_PTRACE``) the refusal comes back as one line with the fix
(:data:`PTRACE_FIX`), never as py-spy's own text. Linux only (``/proc``). No torch here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from explorer.errors import MissingExtraError

#: What to change when attaching is refused.
PTRACE_FIX = (
    "attaching to the ranks was refused (ptrace): run the doctor as the job's user with "
    "`sudo sysctl kernel.yama.ptrace_scope=0`, or as root, or start the container with "
    "--cap-add SYS_PTRACE"
)
_REFUSED_WORDS = ("permission denied", "operation not permitted", "ptrace")


#: What a helper's ``python -c`` code imports (see :attr:`Proc.is_python_helper`).
_PYTHON_HELPERS = (
    "multiprocessing.resource_tracker",
    "multiprocessing.forkserver",
    "multiprocessing.semaphore_tracker",
)


@dataclass(frozen=True)
class Proc:
    """A process as ``/proc`` shows it: alive (zombies are not), its command line and its rank's environment."""

    pid: int
    ppid: int
    state: str  # R, S, D, Z, T...
    cmdline: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X")

    @property
    def is_python(self) -> bool:
        return bool(self.cmdline) and "python" in Path(self.cmdline[0]).name

    @property
    def is_python_helper(self) -> bool:
        """Python's own helper process (multiprocessing's resource tracker or fork server): it
        keeps the environment it was started in (a kernel's RANK, after DeepSpeed ran in it)
        and runs no user code, so it is never a rank."""
        args = self.cmdline[1:]
        if not self.is_python or "-c" not in args:  # multiprocessing puts its flags first
            return False
        code = args[args.index("-c") + 1] if args.index("-c") + 1 < len(args) else ""
        return any(code.startswith(f"from {helper} import") for helper in _PYTHON_HELPERS)

    @property
    def rank(self) -> Optional[int]:
        value = self.env.get("RANK", "")
        return int(value) if value.isdigit() else None

    @property
    def world_size(self) -> Optional[int]:
        value = self.env.get("WORLD_SIZE", "")
        return int(value) if value.isdigit() else None


@dataclass(frozen=True)
class Dump:
    """One process's py-spy dump: its threads (py-spy's JSON), or why there is none."""

    pid: int
    threads: tuple[dict, ...] = ()
    refused: str = ""  # the reason no stack was read ("" when it was)
    seconds: float = 0.0


def read_proc(pid: int) -> Optional[Proc]:
    """The process ``pid`` from ``/proc``, or None when there is none."""
    base = Path("/proc") / str(pid)
    try:
        stat = (base / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ')'.
    rest = stat[stat.rindex(")") + 2 :].split()
    cmdline = tuple(
        a for a in _read_bytes(base / "cmdline").decode(errors="replace").split("\0") if a
    )
    env_items = _read_bytes(base / "environ").decode(errors="replace").split("\0")
    env = {k: v for k, _, v in (item.partition("=") for item in env_items) if k in _ENV_KEYS}
    return Proc(pid, int(rest[1]), rest[0], cmdline, env)


_ENV_KEYS = frozenset({"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT"})


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""


def tree(pid: int) -> list[Proc]:
    """``pid`` and every process below it, parents first (read from ``/proc``)."""
    procs = {p.pid: p for p in map(read_proc, _all_pids()) if p is not None}
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        if current in procs:
            out.append(procs[current])
        todo.extend(sorted(children.get(current, [])))
    return out


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def py_spy() -> str:
    """The ``py-spy`` program beside this interpreter, else on PATH; MissingExtraError without it."""
    beside = Path(sys.executable).with_name("py-spy")
    found = str(beside) if beside.exists() else shutil.which("py-spy")
    if not found:
        raise MissingExtraError("py-spy", "doctor", "reading a live job's stacks")
    return found


def dump_all(pids: Sequence[int], timeout_s: float = 20.0) -> dict[int, Dump]:
    """Every pid's :class:`Dump`, the py-spy runs side by side (see the module docstring)."""
    import time

    program = py_spy()
    started: dict[int, tuple[subprocess.Popen, float]] = {}
    for pid in pids:
        cmd = [program, "dump", "--pid", str(pid), "--locals", "--nonblocking", "--json"]
        started[pid] = (
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
            time.monotonic(),
        )
    out = {}
    for pid, (proc, t0) in started.items():
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            out[pid] = Dump(pid, refused=f"py-spy took over {timeout_s:.0f} s")
            continue
        out[pid] = parse_dump(pid, proc.returncode, stdout, stderr, time.monotonic() - t0)
    return out


def parse_dump(pid: int, code: int, stdout: str, stderr: str, seconds: float = 0.0) -> Dump:
    """py-spy's answer as a :class:`Dump`: its threads, or one line saying why there are none."""
    if code == 0:
        try:
            threads: Any = json.loads(stdout)
        except json.JSONDecodeError:
            return Dump(pid, refused="py-spy wrote no readable JSON", seconds=seconds)
        return Dump(pid, tuple(t for t in threads if isinstance(t, dict)), seconds=seconds)
    text = (stderr or stdout).strip().splitlines()
    last = text[-1] if text else f"py-spy exited {code}"
    if any(word in (stderr or "").lower() for word in _REFUSED_WORDS):
        return Dump(pid, refused=PTRACE_FIX, seconds=seconds)
    return Dump(pid, refused=f"py-spy could not read it: {last}", seconds=seconds)


__all__ = ["PTRACE_FIX", "Dump", "Proc", "dump_all", "parse_dump", "py_spy", "read_proc", "tree"]
