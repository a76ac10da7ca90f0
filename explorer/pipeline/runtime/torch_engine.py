"""Cross-check with PyTorch's own engine: the same run executed by ``torch.distributed.pipelining``.

:func:`run_torch_engine` takes the :class:`RunSpec` our engine runs (model, stage split, seed,
micro-batches, iterations) and runs it with PyTorch's ``_PipelineScheduleRuntime`` instead, one
process per rank on gloo (:mod:`.torch_worker`), on the compute order :mod:`.torch_orders`
picks (PyTorch's own ``ScheduleGPipe``/``ScheduleInterleaved1F1B`` order, or ours where PyTorch's
is broken, as ``Schedule1F1B``'s is in torch 2.9). Timings come from the profiler's ``PP:``
events, read by :func:`explorer.pipeline.traces.read_chrome_trace`, so they are PyTorch's own view.

Why the runtime and not the schedule classes' own loops: ``ScheduleGPipe`` labels its work
``Forward i``/``Backward i`` (no stage), ``Schedule1F1B`` labels nothing; only the runtime
labels every action ``PP:<action>``. Its clock and ours differ in one way worth knowing:
PyTorch posts a receive (``RECV_F`` is an ``irecv``) and waits for it inside the ``F``/``B``
that needs the data, where our ``RecvActivation`` blocks. Each torch ``F``/``B`` record therefore
carries ``wait``: the time from its start to its first operator, i.e. the wait for its input
(plus a few tens of microseconds of Python, which is all it is on the first stage's ``F``).

Losses and gradients are compared with the same reference as our engine. They can be bitwise
equal only when 1/M is a power of two: PyTorch divides the summed gradients by M after the
last backward, we scale each loss by 1/M before its backward; scaling by a power of two is
exact in floating point, any other M rounds differently (``within_tolerance`` then says
whether they agree to rtol 1e-5, atol 1e-6).

Traces from several ranks share one axis because the profiler stamps wall-clock time and the
ranks share a host (``torch_engine`` never runs across machines).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Optional, Union

import numpy as np

from explorer.failure import Failure, FailureKind, signal_name
from explorer.pipeline.analysis.measured import makespan
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.torch_orders import OrderChoice, OrderSource, choose_order
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.torch_actions import TorchAction, format_action
from explorer.pipeline.traces import MeasuredTrace, read_chrome_trace
from explorer.pipeline.traces.folder import RunFolderLock, new_run_id
from explorer.pipeline.traces.follow import Follower, failure_of
from explorer.processes import Child, Engine, Report, free_port, rank_env, supervise
from explorer.processes.orphan import LAUNCHER_PID

#: The one change made to PyTorch's engine (torch 2.9), in each rank by
#: :func:`.torch_worker._skip_neighbour_handshake`; every result names it.
WORKAROUND = (
    "PipelineStage._get_init_p2p_neighbors_ops skipped: in torch 2.9 its handshake sends an int64 "
    "tensor into a float32 receive, which gloo rejects ('8 vs 4' bytes); it only warms up NCCL "
    "communicators, and every real exchange is unchanged"
)

#: How PyTorch's engine ended: it ran, it failed, or it cannot run this schedule.
TorchRunStatus = Literal["ran", "failed", "unsupported"]


@dataclass
class TorchRunResult:
    """One run of PyTorch's engine; ``status`` is ``ran``, ``failed`` or ``unsupported`` (never raised)."""

    status: TorchRunStatus
    order: OrderChoice
    losses_by_iteration: list[list[float]] = field(default_factory=list)
    bitwise_equal_to_reference: Optional[bool] = None
    within_tolerance: Optional[bool] = None
    max_abs_diff_to_reference: Optional[float] = None
    #: Sum of |gradient| over the reference's: 1 when averaged alike, M when summed and never divided.
    grad_scale_to_reference: Optional[float] = None
    digest: Optional[str] = None
    failure: Optional[Failure] = None
    #: Every ``PP:`` action of every profiled iteration, with its label, iteration and wait (s).
    measured: MeasuredTrace = field(default_factory=lambda: MeasuredTrace.from_records([]))
    workarounds: list[str] = field(default_factory=list)
    #: Every P2P message that did not match its receive (:mod:`.torch_messages`), first one first.
    contract: list[dict] = field(default_factory=list)
    torch_version: str = ""
    folder: Optional[Path] = None

    @property
    def ok(self) -> bool:
        return self.status == "ran" and self.failure is None

    @property
    def losses(self) -> list[float]:
        return self.losses_by_iteration[-1] if self.losses_by_iteration else []

    @property
    def records(self) -> list[dict]:
        """The actions as written in ``--json``'s ``instructions``: rank, stage, action, kind
        (code), microbatch, iteration, start, end, wait (s)."""
        m = self.measured
        cols = (
            m.rank,
            m.stage,
            m.action,
            m.kind,
            m.microbatch,
            m.iteration,
            m.start,
            m.end,
            m.wait,
        )
        return [
            {
                "rank": r,
                "stage": s,
                "action": a,
                "kind": Kind(k).code,
                "microbatch": mb,
                "iteration": it,
                "start": t0,
                "end": t1,
                "wait": w,
            }
            for r, s, a, k, mb, it, t0, t1, w in zip(*(c.tolist() for c in cols))
        ]

    def trace(self, iteration: Optional[int] = None) -> MeasuredTrace:
        """The :class:`MeasuredTrace` of one profiled iteration, the last by default (seconds,
        ``step`` unknown: -1; each action's label and the time its compute waited on an ``irecv``)."""
        return replace(
            self.measured.of_iteration(iteration), source=f"PyTorch {self.torch_version}"
        )

    def makespan(self, iteration: Optional[int] = None) -> float:
        """Seconds from the first action's start to the last one's end, over all ranks."""
        return makespan(self.trace(iteration))

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "status": self.status,
            "torch_version": self.torch_version,
            "order_source": self.order.source,
            "torch_schedule": self.order.torch_schedule,
            "order_note": self.order.problem,
            "order": self.order.actions,
            "losses": self.losses,
            "losses_by_iteration": self.losses_by_iteration,
            "bitwise_equal_to_reference": self.bitwise_equal_to_reference,
            "within_tolerance": self.within_tolerance,
            "max_abs_diff_to_reference": self.max_abs_diff_to_reference,
            "grad_scale_to_reference": self.grad_scale_to_reference,
            "digest": self.digest,
            "failure": self.failure.to_dict() if self.failure else None,
            "workarounds": self.workarounds,
            "contract": self.contract,
            "makespan_ms": self.makespan() * 1e3,
            "instructions": self.records,
        }


def run_torch_engine(
    spec: RunSpec,
    folder: Union[None, str, Path] = None,
    *,
    order: OrderSource = "auto",
    timeout_s: Optional[float] = None,
) -> TorchRunResult:
    """Run ``spec``'s model and micro-batches on PyTorch's engine (see the module docstring)."""
    import torch

    choice = choose_order(spec.build_schedule(), order)
    version = torch.__version__
    if choice.actions is None:
        return TorchRunResult(
            "unsupported",
            choice,
            failure=Failure(FailureKind.UNSUPPORTED, choice.problem or "unknown"),
            torch_version=version,
        )
    if spec.backend != "gloo" or spec.device != "cpu":
        return TorchRunResult(
            "unsupported",
            choice,
            torch_version=version,
            failure=Failure(
                FailureKind.UNSUPPORTED,
                f"the PyTorch cross-check runs on gloo/CPU only; got backend {spec.backend}, device {spec.device}",
            ),
        )
    path = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="explorer-torch-"))
    path.mkdir(parents=True, exist_ok=True)
    spec = replace(spec, run_id=spec.run_id or new_run_id())
    # one run per folder, as on the explorer's engine: an earlier run's files are set aside
    # (its torch_rank<R>.jsonl were appended to, and its stale ranks read as this run's)
    lock = RunFolderLock.claim(path, spec.run_id)
    try:
        spec.write(path)
        actions = {str(r): a for r, a in choice.actions.items()}
        (path / "actions.json").write_text(json.dumps(actions))
        engine = TorchEngine(path, spec.world_size)
        out = supervise(
            engine, timeout_s=timeout_s if timeout_s is not None else spec.stall_timeout_s + 60.0
        )
        return _collect(path, choice, out.returncodes, engine.failures(), version, [WORKAROUND])
    finally:
        lock.release()


class TorchEngine(Engine):
    """PyTorch's engine on the supervisor: one :mod:`.torch_worker` per rank, reports from ``torch_rank<R>.jsonl``."""

    def __init__(self, folder: Path, world: int) -> None:
        self.folder, self.world = folder, world
        self.follower = Follower(folder, prefix="torch_rank")
        self._seen = 0

    def children(self) -> list[Child]:
        port = free_port()
        return [
            Child(
                rank,
                [sys.executable, "-m", "explorer.pipeline.runtime.torch_worker", str(self.folder)],
                {**rank_env(rank, self.world, port, threads=1), LAUNCHER_PID: str(os.getpid())},
                self.folder / f"torch_rank{rank}.log",
                warm=True,
            )
            for rank in range(self.world)
        ]

    def read(self) -> list[Report]:
        self.follower.poll()
        events, self._seen = self.follower.events[self._seen :], len(self.follower.events)
        return [Report(int(e["rank"]), str(e.get("type")), e) for e in events]

    def failures(self) -> list[Failure]:
        """Every rank's failure line, by rank."""
        return sorted(
            (failure_of(e) for e in self.follower.events if e["type"] == "failure"),
            key=lambda f: f.rank if f.rank is not None else -1,
        )


def _collect(
    folder: Path,
    choice: OrderChoice,
    codes: dict[int, int],
    failures: list[Failure],
    version: str,
    workarounds: list[str],
) -> TorchRunResult:
    result = TorchRunResult(
        "ran", choice, torch_version=version, folder=folder, workarounds=workarounds
    )
    final = folder / "torch_result.json"
    if final.exists():
        data = json.loads(final.read_text())
        for key in (
            "losses_by_iteration",
            "bitwise_equal_to_reference",
            "within_tolerance",
            "max_abs_diff_to_reference",
            "grad_scale_to_reference",
            "digest",
        ):
            setattr(result, key, data[key])
    if failures or not final.exists() or any(c != 0 for c in codes.values()):
        result.status = "failed"
        if failures:
            # a lost connection is what a peer's death looks like: the cause is elsewhere
            own = next((f for f in failures if "Connection" not in f.message), failures[0])
            result.failure = replace(
                own,
                consequences=tuple(f"rank {f.rank}: {f.message}" for f in failures if f is not own),
            )
        else:
            bad = [r for r, c in sorted(codes.items()) if c != 0]
            result.failure = Failure(
                FailureKind.EXIT,
                f"ranks {bad} ended with codes {[codes[r] for r in bad]} "
                f"without a word (killed, or stalled past the timeout); see torch_rank<R>.log in {folder}",
                rank=bad[0] if bad else None,
                returncode=codes[bad[0]] if bad else None,
                signal=signal_name(codes[bad[0]]) if bad else None,
            )
    result.measured = _measured(folder, sorted(codes))
    return _judged(result, folder)


def _judged(result: TorchRunResult, folder: Path) -> TorchRunResult:
    """``result`` with its messages checked; the first violation becomes its failure (what
    failed after it follows as "then"), as on the explorer's own runs."""
    from explorer.pipeline.analysis.contract import failure_of
    from explorer.pipeline.runtime.run_folder import torch_contract

    found = torch_contract(folder)
    if found is None or not found[1]:
        return result
    schedule, violations = found
    result.contract = [v.to_dict() for v in violations]
    result.failure = failure_of(violations[0], schedule, result.failure)
    result.status = "failed"
    return result


def _measured(folder: Path, ranks: list[int]) -> MeasuredTrace:
    """Every ``PP:`` action of every rank's profiler trace, on one axis starting at the first
    iteration, in order of (iteration, start, rank)."""
    parts = []
    for rank in ranks:
        path = folder / f"torch_rank{rank}.json"
        if path.exists():
            parts.append(_rank_actions(json.loads(path.read_text()), rank))
    every = MeasuredTrace.concat(parts)
    if not len(every):
        return every
    t0 = every.start.min()
    every = replace(every, start=every.start - t0, end=every.end - t0)
    return every.take(np.lexsort((every.rank, every.start, every.iteration)))


def _rank_actions(doc: dict, rank: int) -> MeasuredTrace:
    """One rank's actions, each with its label, the iteration whose span holds its start, and
    (for a compute) the time from its start to its first operator: the wait on its ``irecv``."""
    trace = read_chrome_trace(doc, rank=rank)
    spans, op_starts = _annotations(doc)
    begins = np.array([s for s, _ in spans])
    action, iteration, wait = [], [], []
    for stage, k, mb, start, end in zip(
        *(c.tolist() for c in (trace.stage, trace.kind, trace.microbatch, trace.start, trace.end))
    ):
        kind = Kind(k)
        it = int(np.searchsorted(begins, start, side="right")) - 1
        w = 0.0
        if kind in (Kind.FORWARD, Kind.BACKWARD, Kind.BACKWARD_INPUT):
            i = int(np.searchsorted(op_starts, start))
            w = float(min(op_starts[i], end) - start) if i < len(op_starts) else 0.0
        action.append(format_action(TorchAction.of(stage, kind, mb)))
        iteration.append(spans[it][1] if it >= 0 else -1)
        wait.append(w)
    return replace(
        trace,
        rank=np.full(len(trace), rank, dtype=np.int64),
        action=np.array(action, dtype=object).reshape(-1),
        iteration=np.array(iteration, dtype=np.int64).reshape(-1),
        wait=np.array(wait, dtype=float).reshape(-1),
    )


def _annotations(doc: dict) -> tuple[list[tuple[float, int]], np.ndarray]:
    """``(start s, iteration)`` of each ``explorer:iteration N`` span, and every operator's start (s), sorted."""
    spans, ops = [], []
    for ev in doc.get("traceEvents", []):
        if ev.get("ph") != "X":
            continue
        name = str(ev.get("name", ""))
        if name.startswith("explorer:iteration "):
            spans.append((float(ev["ts"]) * 1e-6, int(name.rsplit(" ", 1)[1])))
        elif ev.get("cat") == "cpu_op":
            ops.append(float(ev["ts"]) * 1e-6)
    return sorted(spans), np.sort(np.array(ops))


__all__ = ["TorchRunStatus", "TorchRunResult", "WORKAROUND", "run_torch_engine", "TorchEngine"]
