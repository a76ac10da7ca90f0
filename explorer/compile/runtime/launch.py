"""Start ``compile-probe --nproc N``'s ranks on this machine and watch them to the end.

The ranks start as ``torchrun`` starts its workers (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT``, a share of the cores each), under the one
supervisor (:mod:`explorer.processes`, engine :class:`ProbeRanks`): each rank leads its
own process group; when one rank ends badly the others get a short grace, then every rank
still alive is killed; the whole run is bounded by ``--timeout``. Rank 0 writes the merged
records; a failure becomes a result whose :class:`~explorer.failure.Failure` holds the
failing rank's last words (and the others' as consequences), and bad input (every rank
refuses the same ``--step``) is raised as the one line the CLI prints.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional

from explorer.compile.traces.records import ProbeResult
from explorer.errors import InputError
from explorer.failure import Failure, FailureKind, says_lost_peer, signal_name, tail
from explorer.folder_lock import new_run_id
from explorer.processes import Child, Engine, free_port, rank_env, supervise
from explorer.processes.isolate import INPUT_ERROR, MARKER

#: After one rank fails, the others get this long to finish their own part (a compile may be running).
GRACE_S = 5.0


class ProbeRanks(Engine):
    """The probe's ranks on the supervisor: one :mod:`.rank_worker` per rank, each with a log file."""

    def __init__(self, folder: Path, nproc: int) -> None:
        self.folder, self.nproc = folder, nproc

    def children(self) -> list[Child]:
        port = free_port()
        extra = {
            "DS_ACCELERATOR": os.environ.get("DS_ACCELERATOR", "cpu"),
            # one id for the job, as torchrun gives its ranks: each rank's trace names it
            "TORCHELASTIC_RUN_ID": new_run_id(),
        }
        return [
            Child(
                rank,
                [
                    sys.executable,
                    "-m",
                    "explorer.compile.runtime.rank_worker",
                    str(self.folder / "spec.json"),
                    str(self.folder / "result.pkl"),
                ],
                rank_env(rank, self.nproc, port, extra=extra),
                self.folder / f"rank{rank}.log",
                warm=True,
            )
            for rank in range(self.nproc)
        ]

    def grace_s(self) -> float:
        return GRACE_S


def _last_words(log: Path) -> str:
    lines = (
        [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
        if log.exists()
        else []
    )
    marked = [ln[len(MARKER) :] for ln in lines if ln.startswith(MARKER)]
    return marked[-1] if marked else (lines[-1][:300] if lines else "nothing")


def _cause_rank(
    codes: Mapping[int, Optional[int]], folder: Path, stopped: frozenset[int] = frozenset()
) -> int:
    """The rank whose ending caused the others': one killed by a signal first (a segfault; not
    one the supervisor itself ``stopped`` once another had gone), then one whose last words are
    not a lost peer, then the first that failed. Rank 1 segfaulting once read "rank 0 of 2 ended
    with exit code 1: ... Connection reset by peer", and rank 1 and its signal went unnamed."""
    failed = [r for r, c in sorted(codes.items()) if c]
    by_signal = [r for r in failed if signal_name(codes[r]) and r not in stopped]
    if by_signal:
        return by_signal[0]
    own = [r for r in failed if not says_lost_peer(_last_words(folder / f"rank{r}.log"))]
    return (own or failed or [0])[0]


def _refused(codes: Mapping[int, int], stopped: frozenset[int]) -> Optional[int]:
    """The first rank that refused the input, when every rank that ended on its own refused it
    (bad input: one line, exit 2); None otherwise. A rank the supervisor stopped after the grace
    had not decided yet: with every rank asked to have refused, a peer still starting on a busy
    machine when rank 0 refused the ``--step`` turned bad input into rank 0's failure (exit 1)."""
    refused = [r for r, c in sorted(codes.items()) if c == INPUT_ERROR]
    decided = [r for r in codes if r not in stopped]
    return refused[0] if refused and all(codes[r] == INPUT_ERROR for r in decided) else None


def run_ranks(
    nproc: int, spec: Mapping[str, Any], timeout_s: float, label: str = ""
) -> ProbeResult:
    """Run the probe on ``nproc`` ranks (``spec``: scenario or step, iterations, backend, config, source)."""
    folder = Path(tempfile.mkdtemp(prefix="explorer-compile-ranks-"))
    try:
        (folder / "spec.json").write_text(json.dumps({**spec, "timeout": timeout_s}))
        out = supervise(ProbeRanks(folder, nproc), timeout_s=timeout_s, poll_s=0.1)
        codes = out.returncodes
        refused = _refused(codes, out.stopped)
        if refused is not None:
            raise InputError(_last_words(folder / f"rank{refused}.log"))
        if (folder / "result.pkl").exists():
            # Rank 0 wrote the merged records whole (renamed into place) after every rank
            # handed in its part: the run is complete. A non-zero exit after that comes from
            # tearing the group down (a peer already gone) and is said, not made the result.
            result = pickle.loads((folder / "result.pkl").read_bytes())
            late = [f"rank {r} exited with code {c}" for r, c in sorted(codes.items()) if c]
            if late:
                result.notes.append(
                    f"{', '.join(late)} after the records were handed in (tearing down the "
                    "process group); the report is complete"
                )
            return result
        bad = _cause_rank(codes, folder, out.stopped)
        others = [
            f"rank {r} ended with exit code {c}: {_last_words(folder / f'rank{r}.log')}"
            for r, c in sorted(codes.items())
            if r != bad and c != 0
        ]
        if out.ending == "timeout":
            failure = Failure(
                FailureKind.TIMEOUT,
                f"rank {bad} of {nproc} did not finish within {timeout_s:g} s "
                "(give --timeout SECONDS to allow longer)",
                rank=bad,
                returncode=codes[bad],
                signal=signal_name(codes[bad]),
            )
        else:
            failure = Failure(
                FailureKind.ABORT if signal_name(codes[bad]) else FailureKind.EXIT,
                f"rank {bad} of {nproc} ended with exit code {codes[bad]}: "
                f"{_last_words(folder / f'rank{bad}.log')}",
                rank=bad,
                returncode=codes[bad],
                signal=signal_name(codes[bad]),
                traceback_tail=tail((folder / f"rank{bad}.log").read_text(errors="replace")),
                consequences=tuple(others),
            )
        return ProbeResult(iterations=[], label=label, failure=failure)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


__all__ = ["GRACE_S", "ProbeRanks", "run_ranks"]
