"""Warm starts: one process imports what a run's ranks share, then forks each rank from it.

Every rank of a run is ``python -m WORKER ARGS`` with the same command line and an environment
that differs only in a few variables (``RANK``, ``LOCAL_RANK``). Each one spent most of its CPU
importing torch (about 1.2 s here, over 2 s on slower machines) before its first instruction: a
4-rank run paid it four times, at once, on a 2-core machine. The template pays it once. It is
started as the supervisor's child with the shared command line and environment, imports
``WORKER`` (all of its imports, none of its ``__main__`` code), and for each rank the supervisor
asks for it forks a process that becomes that rank: its own session and process group, its own
log, its own environment, and then ``WORKER`` run as ``__main__`` exactly as ``python -m`` runs
it (exit status, traceback, ``atexit`` at the end). Fork after ``import torch`` is what
PyTorch's own ``DataLoader`` workers do; nothing here touches a device before the fork.

What a rank looks like from outside stays as it was: its command line names the template, the
worker and the worker's arguments (the run folder stays its last argument), and its environment
as ``/proc/PID/environ`` shows it (which ``explorer doctor`` reads to tell ranks apart) holds its
own ``RANK`` and ``LOCAL_RANK``: the template's environment ends with a padding variable whose
bytes each rank rewrites in place with its own variables (:func:`_show_own_environment`).

The protocol, one line each way: the supervisor writes a JSON request per rank on the template's
stdin (``{"rank", "env", "log", "cwd"}``); the template answers ``pid RANK PID`` once the rank is
forked and ``exit RANK STATUS`` once it ended (a negative status is the signal). Ended ranks are
not reaped until the supervisor writes ``"reap"`` (as :mod:`.watch` does for its own children: a
process group id must not be reused before the supervisor's last ``SIGKILL``); then the template
kills what is left of its ranks' groups, reaps them, answers ``reaped`` and exits. The template
ends with its launcher (:mod:`.orphan`; its requests ending unsaid mean the same), and each rank
ends with the template, as it would have ended with the launcher.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import select
import sys
from typing import Mapping, Optional

from explorer.gcpause import frozen_imports
from explorer.processes.orphan import LAUNCHER_PID, ORPHANED, end_with_launcher
from explorer.processes.warm import PAD_VARIABLE, exit_status, kill_rank

__all__ = ["main"]

#: How often the template looks for ranks that ended while no request comes (seconds).
POLL_S = 0.05


# -- the template process ------------------------------------------------------------------------


def _say(out: int, line: str) -> None:
    os.write(out, (line + "\n").encode())


def _serve(requests: int, out: int) -> dict:
    """Fork a rank per request until the supervisor says ``"reap"``; returns only in a forked
    rank, with its request.

    The template itself leaves through ``os._exit``: once every rank is reaped, or at once
    when its requests end unsaid (the supervisor is gone: each rank ends by its own
    :func:`.orphan.end_with_launcher`, and one stopped by a signal stays as it stands)."""
    ranks: dict[int, int] = {}  # pid -> rank
    said_ended: set[int] = set()
    pending = b""
    reap = False
    while not reap:
        ready, _, _ = select.select([requests], [], [], POLL_S)
        chunk = os.read(requests, 65536) if ready else None
        if chunk == b"":
            os._exit(ORPHANED)
        pending += chunk or b""
        while b"\n" in pending and not reap:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            if request == "reap":
                reap = True
                break
            sys.stdout.flush()  # what the imports printed, written once, not once per rank
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                os.close(requests)
                os.close(out)
                return request
            ranks[pid] = int(request["rank"])
            _say(out, f"pid {request['rank']} {pid}")
        for pid, rank in ranks.items():
            if pid not in said_ended:
                code = exit_status(pid)
                if code is not None:
                    said_ended.add(pid)
                    _say(out, f"exit {rank} {code}")
    for pid in ranks:
        kill_rank(pid)
    for pid, rank in ranks.items():
        code = exit_status(pid, reap=True)
        if pid not in said_ended and code is not None:
            _say(out, f"exit {rank} {code}")
    _say(out, "reaped")
    os._exit(0)


def _show_own_environment(own: Mapping[str, str]) -> None:
    """Write this rank's own variables over the padding that ends the environment block the
    kernel shows in ``/proc/self/environ`` (the template's, inherited by the fork), so that
    other tools read this process's ``RANK`` there as they would in a rank started afresh.

    The C library's ``environ`` points into that block: the padding variable is unset first
    (so nothing points into the bytes rewritten), then the variables are set in the process as
    well. Nothing is written when the padding is missing or too short, or where ``/proc`` does
    not show the block where its addresses say: the block keeps the template's variables, and the
    process still runs with its own."""
    block = os.environ.get(PAD_VARIABLE)
    os.unsetenv(PAD_VARIABLE)
    os.environ.pop(PAD_VARIABLE, None)
    os.environ.update(own)
    if block is None:
        return
    tail = f"{PAD_VARIABLE}={block}\0".encode()
    try:
        with open("/proc/self/environ", "rb") as shown_file:
            shown = shown_file.read()
        with open("/proc/self/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        env_start, env_end = int(fields[47]), int(fields[48])  # stat fields 50 and 51
    except (OSError, IndexError, ValueError):
        return  # no /proc here, or one that does not say where the block lies
    start = env_end - len(tail)
    # the kernel's own view of the block must match the addresses before a byte is written
    if env_end - env_start != len(shown) or not shown.endswith(tail) or start < env_start:
        return
    if ctypes.string_at(start, len(tail)) != tail:
        return
    body = b"".join(f"{k}={v}\0".encode() for k, v in own.items())
    filler = len(tail) - len(body) - len(PAD_VARIABLE) - 2
    if filler < 0:
        return
    ctypes.memmove(start, body + f"{PAD_VARIABLE}={'x' * filler}\0".encode(), len(tail))


def _become_rank(request: Mapping, template_pid: Optional[int]) -> None:
    """In the forked process: a session of its own, its log as stdout and stderr, its variables,
    its folder, and the template as the launcher it ends with (where the launcher asked its
    ranks to end with it: ``template_pid``)."""
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    for fd in (null, log):
        os.close(fd)
    _show_own_environment(dict(request["env"]))
    if template_pid is not None:
        os.environ[LAUNCHER_PID] = str(template_pid)
    if request.get("cwd"):
        os.chdir(request["cwd"])


def main(argv: list[str]) -> None:
    """``python -m explorer.processes.template WORKER ARGS...``: see the module docstring."""
    worker, args = argv[0], argv[1:]
    ends_with_launcher = end_with_launcher()
    requests, out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(2, 1)  # the worker's imports may print: into the first rank's log, with stderr
    os.close(null)
    with frozen_imports():  # the ranks share these pages: no collection may write to them
        importlib.import_module(worker)
    request = _serve(requests, out)
    _become_rank(request, os.getppid() if ends_with_launcher else None)
    sys.argv = [sys.argv[0], *args]
    sys.modules.pop(worker, None)  # run afresh as __main__, as `python -m` runs it
    import runpy

    runpy.run_module(worker, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
