"""The probe: run a step function for N iterations and record what Dynamo did in each.

The user's code runs in this process (it holds their model; a child process would hide
Dynamo's state), so the probe is defensive instead: Dynamo's config changes and log
handlers are undone in ``finally`` blocks, and an exception in the step ends the run with a
result that carries the error and the iterations recorded so far, instead of losing them.
Per iteration it costs three clock reads (wall, the process's CPU time, and on Linux the
time this thread waited for a core, from ``/proc/thread-self/schedstat``), one read of Dynamo's bounded metrics deque and, with
a :class:`VariantTracker`, one dict update per compiled graph call (see the benchmark).
Where CUDA is initialised, the device is synchronised before the start and before the end
time of an iteration, decided afresh each time (:func:`should_synchronize`), so GPU work is
timed in the iteration that queued it; each iteration records whether it was.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping, Optional, Protocol

from explorer.compile.analysis.diagnosis import diagnose
from explorer.compile.runtime import cache
from explorer.compile.runtime.sources import SourceKind, make_source
from explorer.compile.runtime.tracking import VariantTracker
from explorer.compile.traces.records import (
    EAGER,
    LIMIT_FAILURE,
    PROBE_ARTIFACT,
    PROBE_RUN_ARTIFACT,
    CompileEvent,
    GraphBreak,
    Iteration,
    ProbeResult,
    frame_of,
    probe_record,
    probe_run_record,
)
from explorer.errors import InputError
from explorer.failure import FailureKind, from_exception
from explorer.gcpause import paused_gc

Step = Callable[[int], Any]


class CudaLike(Protocol):
    """The three calls of ``torch.cuda`` the probe's barrier needs (a fake in the CPU tests)."""

    def is_available(self) -> bool: ...

    def is_initialized(self) -> bool: ...

    def synchronize(self) -> None: ...


def should_synchronize(cuda_available: bool, cuda_initialized: bool) -> bool:
    """Whether to wait for the device before reading a clock: only where CUDA is up in this process.

    Asked afresh before every clock read of every iteration, never once for the run: a step
    that first touches CUDA inside step 0 (a model built or moved lazily) starts CUDA there,
    and from that moment its kernels run after their launches return. Without the barrier the
    iteration's end time would be taken when the launches are queued, and the work would land
    in whichever later iteration waits. Before CUDA is initialised no GPU work can be pending,
    so skipping the barrier then loses nothing (and never starts CUDA for a CPU-only step).
    """
    return cuda_available and cuda_initialized


def _barrier(cuda: Optional[CudaLike]) -> bool:
    """Wait for the device if :func:`should_synchronize` says so now; True when it waited."""
    if cuda is None or not should_synchronize(cuda.is_available(), cuda.is_initialized()):
        return False
    cuda.synchronize()
    return True


def _cuda() -> Optional[CudaLike]:
    """This process's ``torch.cuda``; None where torch was built without it."""
    import torch

    return getattr(torch, "cuda", None)


def _waited_ns() -> Optional[int]:
    """Nanoseconds this thread has spent ready to run but waiting for a core (Linux), None elsewhere.

    The kernel's run-queue delay: the time other processes held the cores this thread wanted.
    It tells a busy machine from slow work (see :class:`Iteration`).
    """
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _frame_key(frame: str) -> tuple[int, str]:
    return (int(frame), frame) if frame.isdigit() else (1 << 30, frame)


def _variants(
    tracker: Optional[VariantTracker], before: Optional[dict[str, int]], limited: set[str]
) -> tuple[tuple[str, ...], Optional[bool]]:
    """The variants that ran (one per frame) and whether a frame past its limit ran eagerly."""
    if tracker is not None and before is not None:
        ran = tracker.ran_since(before)
        fell = {f for f in limited if f not in ran}
        labels = dict(ran)
        labels.update({f: EAGER for f in fell})
        return tuple(labels[f] for f in sorted(labels, key=_frame_key)), bool(fell)
    fronts = cache.front_variants() if cache.supported() else {}
    ordered = tuple(fronts[f] for f in sorted(fronts, key=_frame_key))
    return ordered, (None if limited else False)


def probe(
    step: Step,
    iterations: int,
    *,
    tracker: Optional[VariantTracker] = None,
    source: SourceKind = "auto",
    reset: bool = True,
    dynamo_config: Optional[Mapping[str, Any]] = None,
    backend: str = "",
    label: str = "",
) -> ProbeResult:
    """Run ``step(i)`` for ``i`` in ``range(iterations)`` and return every record and a diagnosis.

    ``reset`` clears Dynamo's caches first (``torch._dynamo.reset()``), so compile ids start
    at ``0/0`` and every compile of the run is seen; it also drops compiled code of other
    models in this process. ``dynamo_config`` patches ``torch._dynamo.config`` for the run
    only (e.g. ``{"recompile_limit": 3}``).
    """
    if not isinstance(iterations, int) or iterations < 1:
        raise InputError(f"iterations must be a positive integer, got {iterations!r}")
    with paused_gc():  # Dynamo, without the collector's passes (explorer.gcpause)
        import torch._dynamo

    patch = dict(dynamo_config or {})
    unknown = [k for k in patch if not hasattr(torch._dynamo.config, k)]
    if unknown:
        raise InputError(f"torch._dynamo.config has no option(s) {', '.join(unknown)}")
    if reset:
        torch._dynamo.reset()
    src = make_source(source)
    cuda = _cuda()
    result = ProbeResult(iterations=[], backend=backend, source=src.name, label=label)
    result.variant_source = "tracking backend" if tracker is not None else "dynamo cache"
    result.threads = torch.get_num_threads()
    limited: set[str] = set()
    with torch._dynamo.config.patch(**patch), src:
        result.recompile_limit = getattr(
            torch._dynamo.config,
            "recompile_limit",
            getattr(torch._dynamo.config, "cache_size_limit", None),
        )
        job = os.environ.get("TORCHELASTIC_RUN_ID", "")  # torchrun's, and the --nproc launcher's
        size = _world_size()
        _write_run_into_trace(probe_run_record("start", iterations, backend, job=job, world=size))
        for i in range(iterations):
            before = tracker.snapshot() if tracker is not None else None
            _barrier(cuda)  # work queued before this iteration is not its own
            # The wait is read inside the wall-time interval, so it never exceeds it: a wait
            # is counted when it ends (the thread gets a core), which is before the next read.
            start = time.perf_counter()
            waited = _waited_ns()
            cpu = time.process_time()
            synchronized = False
            try:
                step(i)
                synchronized = _barrier(cuda)  # decided now: step(i) may have started CUDA
            except Exception as exc:  # the user's step: keep what was recorded so far
                result.failure = from_exception(
                    exc,
                    FailureKind.EXCEPTION,
                    message=f"iteration {i}: {type(exc).__name__}: {exc}",
                    step=i,
                )
                break
            finally:
                cpu_ms = (time.process_time() - cpu) * 1e3
                after = _waited_ns()
                ms = (time.perf_counter() - start) * 1e3
                waited_ms = (
                    (after - waited) / 1e6 if waited is not None and after is not None else None
                )
            events, breaks = src.drain(i)
            _record(result, events, breaks)
            limited |= {c.frame for c in events if c.failed == LIMIT_FAILURE}
            variants, fallback = _variants(tracker, before, limited)
            compiled = any(not c.failed for c in events)
            it = Iteration(i, ms, compiled, variants, fallback, cpu_ms, waited_ms, synchronized)
            result.iterations.append(it)
            _write_into_trace(it, [c.compile_id for c in events], result)
        ended = result.failure
        failure = {"kind": str(ended.kind), "message": ended.message} if ended else None
        _write_run_into_trace(probe_run_record("end", len(result.iterations), failure=failure))
        result.guards = cache.guard_differences() if cache.supported() else []
    result.diagnosis = diagnose(result)
    return result


def _write_into_trace(it: Iteration, compile_ids: list[str], result: ProbeResult) -> None:
    """The iteration's record, as one artifact of torch's structured trace when ``TORCH_TRACE``
    is on (torch writes nothing otherwise).

    The trace never says which iteration compiled, how long each took or which cached variant
    ran; ``read`` of a probe's trace without these gave another verdict than the probe of the
    same run (a warm-up recompile read as a finding, cycling read as recompiles). With them,
    ``read`` diagnoses the probe's own iterations."""
    from torch._logging import trace_structured

    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": PROBE_ARTIFACT, "encoding": "json"},
        payload_fn=lambda: probe_record(it, compile_ids, result.recompile_limit, result.threads),
        expect_trace_id=False,
        record_logging_overhead=False,
    )


def _world_size() -> int:
    """The ranks of the job this probe is one rank of (1 outside an initialised group)."""
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _write_run_into_trace(doc: dict[str, Any]) -> None:
    """The run's start or end (:data:`PROBE_RUN_ARTIFACT`) in torch's structured trace, when
    ``TORCH_TRACE`` is on: ``read`` then knows a run that ended before its end record (the step
    exited, crashed or was killed, or the trace was cut between records) and one that failed."""
    from torch._logging import trace_structured

    trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": PROBE_RUN_ARTIFACT, "encoding": "json"},
        payload_fn=lambda: doc,
        expect_trace_id=False,
        record_logging_overhead=False,
    )


def _record(result: ProbeResult, events: list[CompileEvent], breaks: list[GraphBreak]) -> None:
    result.compiles.extend(events)
    result.graph_breaks.extend(breaks)


__all__ = ["CudaLike", "probe", "should_synchronize", "Step", "frame_of"]
