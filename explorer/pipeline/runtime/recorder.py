"""Per-rank live trace: one JSON line per event, appended to ``rank<R>.jsonl`` as the run goes.

Each rank owns its file, so nothing is shared between processes and a follower (the notebook,
``explorer.pipeline.traces.follow``) can tail the folder while the job runs. Lines are written
at the end of every step, so a rank that is killed leaves every step it finished on disk: the
partial trace of a failed run is never lost.

Line types: ``start`` (rank, pid, stages), ``instr`` (one timed instruction), ``iteration``
(its span), ``failure`` (where and why a rank stopped: a :class:`~explorer.failure.Failure`),
``lost`` (timed instructions whose marks could no longer be read, and why), ``done``.

The recorder holds the rank's clock (:mod:`.clock`), so every write resolves the marks the same
way: a failure path that writes what was measured before it cannot meet a CUDA event where it
expected nanoseconds, and a failure line is written even when the device cannot be read. Times are seconds since the
rank's ``t0``, taken right after a barrier that every rank leaves together, which aligns the
ranks' clocks to within the barrier's skew (tens of microseconds on one host; see the README
section of the package for several machines).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Optional, TextIO

from explorer.failure import Failure
from explorer.pipeline.runtime.clock import Clock, CpuClock, ready_prefix
from explorer.pipeline.schedules.instructions import Instruction


def rank_file(folder: Path, rank: int, prefix: str = "rank") -> Path:
    return Path(folder) / f"{prefix}{rank}.jsonl"


class Recorder:
    """Buffered writer of one rank's trace lines (see the module docstring)."""

    def __init__(self, folder: Path, rank: int, run_id: str = "", prefix: str = "rank") -> None:
        self.rank = rank
        self.run_id = run_id  # every line names its run, so a folder can never mix two
        self.path = rank_file(folder, rank, prefix)
        self._fh: TextIO = open(self.path, "a", buffering=1 << 16, encoding="utf-8")
        self._pending: list[tuple[int, int, Instruction, Any, Any, Optional[dict]]] = []
        self.t0_ns = 0
        self.clock: Clock = CpuClock()

    def event(self, kind: str, /, **fields: Any) -> None:
        """Write one non-instruction line and push it to disk at once (they are rare)."""
        self._fh.write(
            json.dumps({"type": kind, "rank": self.rank, "run": self.run_id, **fields}) + "\n"
        )
        self._fh.flush()

    def failure(self, failure: Failure, **fields: Any) -> None:
        """This rank's :class:`Failure` as one ``failure`` line (its own rank filled in)."""
        doc = failure.at(rank=self.rank).to_dict()
        doc.pop("rank")
        self.event("failure", **doc, time=time.time(), **fields)

    def start(
        self, stages: list[int], t0_ns: int, clock: Optional[Clock] = None, **fields: Any
    ) -> None:
        """The rank's ``start`` line; ``clock`` makes every mark from now on (default: the host's)."""
        self.t0_ns = t0_ns
        if clock is not None:
            self.clock = clock
        self.event("start", pid=os.getpid(), stages=stages, **fields)

    def add(
        self,
        iteration: int,
        step: int,
        ins: Instruction,
        start: Any,
        end: Any,
        message: Optional[dict] = None,
    ) -> None:
        """Remember one instruction's start/end marks (ints in ns, or CUDA events); ``message``
        is a send's or receive's ``p2p`` (and ``reused``) fields
        (:mod:`explorer.pipeline.traces.messages`), written on its line."""
        self._pending.append((iteration, step, ins, start, end, message))

    def flush(self) -> None:
        """Write every remembered instruction (on a GPU: waits for the device if it must)."""
        self._write(len(self._pending))

    def flush_ready(self) -> None:
        """Write the remembered instructions whose marks can be read now, without waiting.

        Called after every step: on CPU that is all of them; on a GPU, those whose events have
        completed, so a follower sees a GPU rank progress too and the run is never stalled.
        """
        self._write(ready_prefix(self.clock, (p[4] for p in self._pending)))

    def flush_before_failure(self) -> None:
        """Write what can still be read, then say what could not; never raises.

        After a device error the events may be unreadable: the failure line that follows must
        be written all the same, so the loss is recorded (``lost``) instead of raised.
        """
        try:
            self.flush()
            return
        except Exception as exc:  # the device may be gone: keep what is still readable
            why = f"{type(exc).__name__}: {exc}"
        try:
            self.flush_ready()
        except Exception:  # not even the completed marks can be read
            pass
        count = len(self._pending)
        if count:
            self._pending.clear()
            self.event("lost", instructions=count, message=why)

    def _write(self, count: int) -> None:
        """Resolve and write the first ``count`` remembered instructions."""
        if count == 0:
            return
        done = self._pending[:count]
        ns = self.clock.resolve([m for _, _, _, a, b, _ in done for m in (a, b)])
        t0, lines = self.t0_ns, []
        for i, (it, step, ins, _, _, message) in enumerate(done):
            lines.append(
                json.dumps(
                    {
                        "type": "instr",
                        "iteration": it,
                        "rank": self.rank,
                        "run": self.run_id,
                        "stage": ins.stage,
                        "step": step,
                        "instruction": ins.deepspeed_repr(),
                        "text": str(ins),
                        "microbatch": ins.microbatch,
                        "buffer": ins.buffer,
                        "start": (ns[2 * i] - t0) * 1e-9,
                        "end": (ns[2 * i + 1] - t0) * 1e-9,
                        **(message or {}),
                    }
                )
            )
        self._fh.write("\n".join(lines) + "\n")
        self._fh.flush()
        del self._pending[:count]

    def seconds(self, ns: int) -> float:
        return (ns - self.t0_ns) * 1e-9

    def close(self) -> None:
        self._fh.close()


__all__ = ["rank_file", "Recorder"]
