"""Start ``compile-probe --nproc N``'s ranks on this machine and watch them to the end.

The ranks start as ``torchrun`` starts its workers (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``, a share of the cores each), following the
pipeline launcher's rules: each rank in its own session, killed with its process group; when
one rank ends badly the others get a short grace, then every rank still alive is killed; the
whole run is bounded by ``--timeout``. Rank 0 writes the merged records; a failure becomes a
result with the failing rank's last words, and bad input (every rank refuses the same
``--step``) is raised as the one line the CLI prints.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from explorer.errors import InputError
from explorer.runtime.isolate import INPUT_ERROR, MARKER
from explorer.runtime.pipeline.launch import free_port
from explorer.traces.compile.records import ProbeResult

GRACE_S = 5.0
POLL_S = 0.1


def _env(rank: int, world: int, port: int) -> dict[str, str]:
    threads = os.environ.get("OMP_NUM_THREADS") or str(max(1, (os.cpu_count() or 1) // world))
    path = os.pathsep.join(
        p for p in [os.getcwd(), *sys.path, os.environ.get("PYTHONPATH", "")] if p
    )
    return {
        **os.environ,
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "OMP_NUM_THREADS": threads,
        "PYTHONPATH": path,
        "DS_ACCELERATOR": os.environ.get("DS_ACCELERATOR", "cpu"),
    }


def _kill(procs: Mapping[int, subprocess.Popen]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    for proc in procs.values():
        proc.wait()


def _last_words(log: Path) -> str:
    lines = (
        [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        if log.exists()
        else []
    )
    marked = [ln[len(MARKER) :] for ln in lines if ln.startswith(MARKER)]
    return marked[-1] if marked else (lines[-1][:300] if lines else "nothing")


def run_ranks(
    nproc: int, spec: Mapping[str, Any], timeout_s: float, label: str = ""
) -> ProbeResult:
    """Run the probe on ``nproc`` ranks (``spec``: scenario or step, iterations, backend, config, source)."""
    folder = Path(tempfile.mkdtemp(prefix="explorer-compile-ranks-"))
    procs: dict[int, subprocess.Popen] = {}
    try:
        (folder / "spec.json").write_text(json.dumps({**spec, "timeout": timeout_s}))
        port = free_port()
        for rank in range(nproc):
            with open(folder / f"rank{rank}.log", "wb") as log:
                procs[rank] = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "explorer.runtime.compile.rank_worker",
                        str(folder / "spec.json"),
                        str(folder / "result.pkl"),
                    ],
                    env=_env(rank, nproc, port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        deadline, first_bad = time.monotonic() + timeout_s, None
        while any(p.poll() is None for p in procs.values()):
            time.sleep(POLL_S)
            now = time.monotonic()
            if first_bad is None and any(p.poll() not in (None, 0) for p in procs.values()):
                first_bad = now
            if now > deadline or (first_bad is not None and now - first_bad > GRACE_S):
                break
        timed_out = any(p.poll() is None for p in procs.values()) and time.monotonic() > deadline
        _kill(procs)
        codes = {r: p.returncode for r, p in procs.items()}
        if codes and all(c == INPUT_ERROR for c in codes.values()):
            raise InputError(_last_words(folder / "rank0.log"))
        if codes.get(0) == 0 and (folder / "result.pkl").exists():
            return pickle.loads((folder / "result.pkl").read_bytes())
        bad = next((r for r, c in sorted(codes.items()) if c != 0), 0)
        why = (
            f"did not finish within {timeout_s:g} s (give --timeout SECONDS to allow longer)"
            if timed_out
            else f"ended with exit code {codes[bad]}: {_last_words(folder / f'rank{bad}.log')}"
        )
        return ProbeResult(iterations=[], label=label, error=f"rank {bad} of {nproc} {why}")
    finally:
        _kill(procs)
        shutil.rmtree(folder, ignore_errors=True)
