"""Instruction clocks: ``perf_counter_ns`` on CPU, CUDA events on a GPU.

On a GPU an instruction returns as soon as its kernels are queued, so host time would measure
the launch, not the work. :class:`CudaClock` records an event on the current stream before and
after each instruction and resolves them without stalling the run: a mark whose event has
completed (``query()``) can be read at any time, the rest once per iteration (one
synchronisation, not one per instruction). The events are placed on the host's
``perf_counter_ns`` axis through a base event recorded right after the aligning barrier.

Every clock answers the same three questions (``now``, ``ready``, ``resolve``), so whoever
writes marks (the recorder, the DeepSpeed tracer) never needs to know which clock made them; in
particular a failure path that writes what was measured before the failure cannot trip over
marks that are events rather than integers.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Optional, Protocol


class Clock(Protocol):
    """What a writer of timed marks needs from a clock."""

    deferred: bool
    #: The host ``perf_counter_ns`` at which the clock was made: the run's time zero.
    base_ns: int

    def now(self) -> Any: ...

    def ready(self, mark: Any) -> bool: ...

    def resolve(self, marks: list[Any]) -> list[int]: ...


class CpuClock:
    """Host wall-clock marks in nanoseconds: always ready."""

    deferred = False

    def __init__(self) -> None:
        self.base_ns = time.perf_counter_ns()

    def now(self) -> int:
        return time.perf_counter_ns()

    def ready(self, mark: Any) -> bool:
        return True

    def resolve(self, marks: list[Any]) -> list[int]:
        return list(marks)


class CudaClock:
    """CUDA event marks on the current stream, turned into host nanoseconds when read.

    ``cuda`` is ``torch.cuda`` (a stand-in with ``Event`` and ``synchronize`` in tests).
    """

    deferred = True

    def __init__(self, cuda: Optional[Any] = None) -> None:
        if cuda is None:
            import torch

            cuda = torch.cuda
        self._cuda = cuda
        cuda.synchronize()
        self.base = cuda.Event(enable_timing=True)
        self.base.record()
        cuda.synchronize()
        self.base_ns = time.perf_counter_ns()

    def now(self) -> Any:
        event = self._cuda.Event(enable_timing=True)
        event.record()
        return event

    def ready(self, mark: Any) -> bool:
        """True when the event has completed: reading it then costs no synchronisation."""
        return bool(mark.query())

    def resolve(self, marks: list[Any]) -> list[int]:
        """Nanoseconds on the host axis; waits for the device only if a mark is still pending."""
        if not all(self.ready(m) for m in marks):
            self._cuda.synchronize()
        return [self.base_ns + int(self.base.elapsed_time(e) * 1e6) for e in marks]


def ready_prefix(clock: Clock, ends: Iterable[Any]) -> int:
    """How many of ``ends`` (in the order they were recorded) can be read now, without a wait.

    Marks on one stream complete in order, so the readable ones are a prefix.
    """
    count = 0
    for end in ends:
        if not clock.ready(end):
            break
        count += 1
    return count


def clock_for(device_type: str) -> Clock:
    """The clock that measures work (not launches) on ``device_type``."""
    return CudaClock() if device_type == "cuda" else CpuClock()


__all__ = ["Clock", "CpuClock", "CudaClock", "clock_for", "ready_prefix"]
