"""Instruction clocks: ``perf_counter_ns`` on CPU, CUDA events on a GPU.

On a GPU an instruction returns as soon as its kernels are queued, so host time would measure
the launch, not the work. :class:`CudaClock` records an event before and after each
instruction and resolves them once per iteration (one synchronisation, not one per
instruction); the events are placed on the host's ``perf_counter_ns`` axis through a base
event recorded right after the aligning barrier.
"""

from __future__ import annotations

import time
from typing import Any


class CpuClock:
    """Host wall-clock marks in nanoseconds; written out after every step."""

    deferred = False

    def now(self) -> int:
        return time.perf_counter_ns()

    def resolve(self, marks: list[Any]) -> list[int]:
        return marks


class CudaClock:
    """CUDA event marks, resolved to nanoseconds at the end of each iteration."""

    deferred = True

    def __init__(self) -> None:
        import torch

        self._torch = torch
        torch.cuda.synchronize()
        self.base = torch.cuda.Event(enable_timing=True)
        self.base.record()
        torch.cuda.synchronize()
        self.base_ns = time.perf_counter_ns()

    def now(self) -> Any:
        event = self._torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def resolve(self, marks: list[Any]) -> list[int]:
        self._torch.cuda.synchronize()
        return [self.base_ns + int(self.base.elapsed_time(e) * 1e6) for e in marks]


__all__ = ["CpuClock", "CudaClock"]
