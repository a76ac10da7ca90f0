"""``explorer.instrument(engine, out_dir)``: one line in a DeepSpeed script, a live trace per rank.

Call it on every rank after ``deepspeed.initialize`` returned a ``PipelineEngine`` (under
``torchrun`` or the ``deepspeed`` launcher, as usual). From then on each rank appends to
``out_dir/rank<R>.jsonl``, in the same line format the explorer's own engine writes, so
``explorer read`` and the live follower read both alike:

- ``start``: rank, pid, stage, DeepSpeed's version, the engine's micro-batches and stages;
- ``schedule``: the steps this rank's schedule yields for an iteration (written when it first
  runs or changes), so the schedule the rank *ran* can be checked, not the one it should have;
- ``instr``: one per executed instruction with iteration, step, DeepSpeed's ``repr``, buffer,
  micro-batch (the k-th instruction of a kind serves micro-batch k, as in the engine), start
  and end in seconds since a start barrier all ranks leave together; a send or receive also
  carries ``p2p``, its tensor tuple (:mod:`explorer.pipeline.traces.messages`): what a send
  sent (``pipe_buffers['outputs']``, or the input gradients), what a receive received into
  (``pipe_recv_buf``, ``grad_layer``) and, when that buffer came from the engine's pool
  (``_grad_layer_buf``, shared by activations and gradients, reused while it is large enough),
  the receive that allocated it (``reused``);
- ``iteration`` (its span), ``failure`` (an :class:`~explorer.failure.Failure` record:
  kind, DeepSpeed's exception type and message, the last frames of its traceback, where and
  when; a neighbour's "Connection closed by peer" is kind ``peer``, a consequence), ``done``
  (the process ended without a failure).

Lines are written every 50 ms at a step's end, at every iteration's end and before a failure
line, so a follower sees each rank progress several times a second and a rank that fails leaves
every instruction it finished; a failure line is written before the exception goes on. How: the engine
dispatches through the class attribute ``_INSTRUCTION_MAP``; this instance gets its own copy
whose entries time the original function, and its ``_train_schedule`` hook is wrapped to count
steps. Nothing else of the engine changes, so a job behaves as it would without the line.

On a GPU an instruction returns when its kernels are queued: the marks are then CUDA events on
the current stream (:class:`~explorer.pipeline.runtime.clock.CudaClock`), read when they have
completed (no wait while the job runs) and all at an iteration's end (one wait), so each
instruction's time is its work's, not its launch's, and no work lands in whichever
instruction synchronises next.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import socket
import time
import traceback
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Union

from explorer.pipeline.runtime.clock import Clock, clock_for, ready_prefix
from explorer.pipeline.runtime.deepspeed.guard import require_installed
from explorer.pipeline.schedules.instructions import KIND_BY_DEEPSPEED_NAME, Instruction

#: Frames of the traceback a failure line keeps (the innermost: DeepSpeed's own code).
TRACEBACK_FRAMES = 6
#: A neighbour's error because the failing rank left: a consequence, never the cause.
_PEER_GONE = re.compile(r"Connection (closed|reset) by peer|Broken pipe", re.I)
#: Seconds between writes of instruction lines (always at an iteration's end and before a failure).
WRITE_EVERY_S = 0.05


def _topology(engine: Any, dist: Any) -> dict:
    """The job's size and this rank's data-parallel replica, as DeepSpeed's grid says: a reader
    of thousands of ranks lays the job out from them (DeepSpeed numbers its ranks pipe-major)."""
    grid = getattr(engine, "grid", None)
    out = {"world_size": dist.get_world_size() if dist.is_initialized() else 1}
    if grid is not None:
        out["data_parallel_size"] = int(getattr(grid, "data_parallel_size", 1))
        out["replica"] = int(getattr(grid, "data_parallel_id", 0))
    return out


class EngineTrace:
    """The live trace of one rank's engine (see the module docstring); made by :func:`instrument`."""

    def __init__(
        self,
        engine: Any,
        out_dir: Union[str, Path],
        run_id: Optional[str] = None,
        clock: Optional[Clock] = None,
    ) -> None:
        import torch.distributed as dist

        version, _, _ = require_installed()
        self.engine = engine
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.stage = int(getattr(engine, "stage_id", 0))
        self.folder = Path(out_dir)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.run_id = run_id or _shared_run_id(dist)
        # Every instruction line starts alike: formatted once.
        self._head = (
            f'{{"type": "instr", "rank": {self.rank}, "run": {json.dumps(self.run_id)}, '
            f'"stage": {self.stage}, '
        )
        self.iteration, self.step = -1, -1
        self.failed = False
        self._pending: list[tuple] = []
        self._lines: list[str] = []
        self._middles: dict[tuple[str, int, int], str] = {}
        self._written_ns = 0
        self._counters: dict[str, int] = {}
        self._last_rows: Optional[list] = None
        self._buffers: Optional[int] = None  # set from the schedule before its first iteration
        self._fh = open(self.folder / f"rank{self.rank}.jsonl", "a", encoding="utf-8")
        if dist.is_initialized():
            dist.barrier()  # every rank leaves together: t0 aligns the ranks' clocks
        # The marks' clock: CUDA events when the engine computes on a GPU (see the module docstring).
        self.clock = clock or clock_for(device_type(engine))
        self.t0_ns = self.clock.base_ns
        self._line(
            "start",
            pid=os.getpid(),
            host=socket.gethostname(),  # with pid: a reader on this host sees the process gone
            stages=[self.stage],
            source="deepspeed",
            deepspeed_version=version,
            engine=type(engine).__name__,
            micro_batches=int(getattr(engine, "micro_batches", 0)),
            num_stages=int(getattr(engine, "num_stages", 1)),
            **_topology(engine, dist),
            unix=time.time(),
        )
        self._install()
        atexit.register(self.close)

    # --- installation -------------------------------------------------------------------
    def _install(self) -> None:
        engine = self.engine
        self._table = {
            cls: self._timed(cls.__name__, fn) for cls, fn in type(engine)._INSTRUCTION_MAP.items()
        }
        self._own_schedule = engine.__dict__.get("_train_schedule")  # the job's own, if it set one
        original_schedule = engine._train_schedule
        self._hook = lambda: self._follow(original_schedule())
        self.attach()
        original_batch = engine.train_batch

        def train_batch(*args: Any, **kwargs: Any) -> Any:
            try:
                return original_batch(*args, **kwargs)
            except BaseException as exc:
                if not self.failed:  # raised outside an instruction (loss aggregation, data)
                    self._failure(None, exc)
                raise

        engine.train_batch = train_batch

    def attach(self) -> None:
        """Trace from the next ``train_batch`` on (done by :func:`instrument`)."""
        self.engine._INSTRUCTION_MAP = self._table
        self.engine._train_schedule = self._hook

    def detach(self) -> None:
        """Stop tracing from the next ``train_batch`` on: the engine dispatches as if never traced."""
        self.engine.__dict__.pop("_INSTRUCTION_MAP", None)
        if self._own_schedule is not None:
            self.engine._train_schedule = self._own_schedule
        else:
            self.engine.__dict__.pop("_train_schedule", None)

    def _timed(self, name: str, fn: Callable) -> Callable:
        pending, clock = self._pending, self.clock.now
        if name in _P2P:
            return self._described(name, fn)

        def run(engine: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                out = fn(engine, **kwargs)
            except BaseException as exc:
                self._failure((name, kwargs.get("buffer_id", -1)), exc)
                raise
            pending.append((self.step, name, kwargs.get("buffer_id", -1), start, clock()))
            return out

        return run

    def _described(self, name: str, fn: Callable) -> Callable:
        """A send or receive, timed, with its tuple described (see the module docstring)."""
        pending, clock = self._pending, self.clock.now
        origins: dict[int, tuple[int, int]] = self.__dict__.setdefault("_origins", {})

        def run(engine: Any, **kwargs: Any) -> Any:
            buffer = kwargs.get("buffer_id", -1)
            sent = _sent(engine, name, buffer)  # before: a SendGrad frees its input buffer
            pool = [id(t) for t in getattr(engine, "_grad_layer_buf", ())]
            start = clock()
            try:
                out = fn(engine, **kwargs)
            except BaseException as exc:
                self._failure((name, buffer), exc)
                raise
            end = clock()
            fields = sent if sent is not None else _received(engine, name, buffer)
            if fields is not None and name in ("RecvActivation", "RecvGrad"):
                into = engine.pipe_recv_buf if name == "RecvActivation" else engine.grad_layer
                used = len(_tuple(into))
                fields += _origin(engine, pool, used, origins, (self.iteration, self.step))
            pending.append((self.step, name, buffer, start, end, fields or ""))
            return out

        return run

    def _follow(self, schedule: Any) -> "_Followed":
        return _Followed(self, schedule)

    # --- writing ------------------------------------------------------------------------
    def _line(self, line_type: str, /, **fields: Any) -> None:
        self._fh.write(
            json.dumps({"type": line_type, "rank": self.rank, "run": self.run_id, **fields}) + "\n"
        )
        self._fh.flush()

    def begin_iteration(self, rows: list) -> None:
        """A new ``train_batch``: count from step 0, write the schedule when it is new."""
        self.iteration += 1
        self.step = -1
        self._counters.clear()
        self._iteration_start = time.perf_counter_ns()
        if rows != self._last_rows:
            self._last_rows = rows
            self._line(
                "schedule",
                iteration=self.iteration,
                stage=self.stage,
                buffers=self._buffers,
                steps=[[[n, b] for n, b in row] for row in rows],
            )

    def flush(self, force: bool = False, everything: Optional[bool] = None) -> None:
        """Turn the timed instructions into lines; write them when :data:`WRITE_EVERY_S` passed.

        ``force`` writes now and (unless ``everything`` is False) waits for every pending mark;
        without it only the marks that can be read without a wait are taken.

        Called at the end of every step. Formatting is a template (no ``json.dumps`` per
        instruction) and the write happens at most every :data:`WRITE_EVERY_S` seconds, at the
        end of an iteration and before a failure line: the cost stays far below an iteration's
        while a follower still sees progress several times a second.
        """
        done = self._resolved(everything=force if everything is None else everything)
        if done:
            t0, lines, head = self.t0_ns, self._lines, self._head
            counters = self._counters
            for step, name, buffer, start, end, message in done:
                mb = counters.get(name, 0)
                counters[name] = mb + 1
                key = (name, mb, buffer)
                middle = self._middles.get(key)
                if middle is None:
                    middle = self._middles[key] = self._middle(name, mb, buffer)
                lines.append(
                    f'{head}"iteration": {self.iteration}, "step": {step}, {middle}{message}'
                    f'"start": {(start - t0) * 1e-9!r}, "end": {(end - t0) * 1e-9!r}}}'
                )
        now = time.perf_counter_ns()
        if self._lines and (force or now - self._written_ns >= WRITE_EVERY_S * 1e9):
            self._fh.write("\n".join(self._lines) + "\n")
            self._fh.flush()
            self._lines.clear()
            self._written_ns = now

    def _resolved(self, everything: bool) -> list[tuple]:
        """Take the pending instructions whose marks can be read (all: ``everything``), in nanoseconds."""
        pending = self._pending
        count = len(pending) if everything else ready_prefix(self.clock, (p[4] for p in pending))
        if count == 0:
            return []
        taken = pending[:count]
        ns = self.clock.resolve([m for p in taken for m in (p[3], p[4])])
        del pending[:count]
        return [
            (p[0], p[1], p[2], ns[2 * i], ns[2 * i + 1], p[5] if len(p) > 5 else "")
            for i, p in enumerate(taken)
        ]

    def _middle(self, name: str, count: int, buffer: int) -> str:
        """The fixed part of a line for the ``count``-th ``name`` on ``buffer`` (cached: they repeat)."""
        kind = KIND_BY_DEEPSPEED_NAME.get(name)
        mb = count if kind is not None and kind.has_microbatch else -1
        instruction = f"{name}(buffer_id={buffer})" if buffer >= 0 else f"{name}()"
        text = str(Instruction(self.stage, kind, mb, buffer)) if kind is not None else name
        return (
            f'"instruction": "{instruction}", "text": "{text}", "microbatch": {mb}, '
            f'"buffer": {buffer}, '
        )

    def end_iteration(self) -> None:
        self.flush(force=True)
        now = time.perf_counter_ns()
        self._line(
            "iteration",
            iteration=self.iteration,
            timed=True,
            start=(self._iteration_start - self.t0_ns) * 1e-9,
            end=(now - self.t0_ns) * 1e-9,
        )

    def _failure(self, where: Optional[tuple[str, int]], exc: BaseException) -> None:
        """Write what failed, where and when, before the exception goes on."""
        now = time.time()
        self.failed = True
        try:
            self.flush(force=True)
        except Exception as lost:  # a device error can leave the events unreadable
            why = f"{type(lost).__name__}: {lost}"
            try:  # what completed before the error still reads without a wait
                self.flush(force=True, everything=False)
            except Exception:  # not even the completed marks can be read
                pass
            count, self._pending[:] = len(self._pending), []
            if count:
                self._line("lost", instructions=count, message=why)
        # The callers (the engine's schedule loop, train_batch) and the frames that raised,
        # without this module's wrappers: the traceback the job would print, innermost last.
        outer = traceback.extract_stack()[:-1] if where else []
        frames = [
            f for f in [*outer, *traceback.extract_tb(exc.__traceback__)] if f.filename != __file__
        ][-TRACEBACK_FRAMES:]
        name, buffer = where if where else (None, -1)
        message = _message(exc, frames)
        self._line(
            "failure",
            kind="peer" if _PEER_GONE.search(message) else "error",
            message=message,
            stage=self.stage,
            step=self.step if where else None,
            iteration=self.iteration,
            instruction=(f"{name}(buffer_id={buffer})" if buffer >= 0 else f"{name}()")
            if name
            else None,
            text=None,
            exception_type=type(exc).__name__,
            traceback_tail="\n".join(
                f"{f.filename}:{f.lineno} in {f.name}: {f.line}" for f in frames
            ),
            time=now,
        )

    def close(self) -> None:
        """Write ``done`` (when nothing failed) and close the file; safe to call twice."""
        if self._fh.closed:
            return
        self.flush(force=True)
        if not self.failed:
            self._line("done")
        self._fh.close()


class _Followed:
    """A schedule as the engine sees it, with the trace told about every step."""

    def __init__(self, trace: EngineTrace, inner: Any) -> None:
        self.trace, self.inner = trace, inner

    def num_pipe_buffers(self) -> int:
        n = self.inner.num_pipe_buffers()
        self.trace._buffers = int(n)
        return n

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def __iter__(self) -> Iterator[list]:
        trace = self.trace
        steps = [list(cmds) for cmds in _steps(self.inner)]  # a schedule's steps are pure data
        if trace._buffers is None:
            trace._buffers = int(self.inner.num_pipe_buffers())
        trace.begin_iteration(
            [[(type(c).__name__, int(getattr(c, "buffer_id", -1))) for c in row] for row in steps]
        )
        for t, cmds in enumerate(steps):
            trace.step = t
            yield cmds
            trace.flush()
        trace.end_iteration()


#: DeepSpeed's P2P instructions, whose lines describe their tensor tuple.
_P2P = ("SendActivation", "SendGrad", "RecvActivation", "RecvGrad")


def _tuple(value: Any) -> list:
    """A tensor or a tuple/list of tensors as a list (None: nothing)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _field(tensors: list, requires_grad: Optional[list] = None) -> str:
    """The ``"p2p": [...], `` part of a line (``requires_grad`` overrides each tensor's own)."""
    items = []
    for i, t in enumerate(tensors):
        grad = t.requires_grad if requires_grad is None else requires_grad[i]
        shape = ",".join(map(str, t.shape))
        items.append(f'"{str(t.dtype).removeprefix("torch.")}[{shape}]{"*" if grad else ""}"')
    return f'"p2p": [{", ".join(items)}], '


def _sent(engine: Any, name: str, buffer: int) -> Optional[str]:
    """What a send is about to send, as the engine picks it; None for a receive."""
    if name == "SendActivation":
        return _field(_tuple(engine.pipe_buffers["outputs"][buffer]))
    if name == "SendGrad":
        inputs = _tuple(engine.pipe_buffers["inputs"][buffer])
        if len(inputs) == 1:
            return _field([t.grad for t in inputs if t.grad is not None])
        # a tuple: the engine skips elements that are not floating point
        return _field([t.grad for t in inputs if t.is_floating_point() and t.grad is not None])
    return None


def _received(engine: Any, name: str, buffer: int) -> Optional[str]:
    """The buffer a receive received into (``requires_grad`` as the stage got it)."""
    if name == "RecvActivation":
        into = _tuple(engine.pipe_recv_buf)
        got = _tuple(engine.pipe_buffers["inputs"][buffer])
        return _field(into, [t.requires_grad for t in got] if len(got) == len(into) else None)
    return _field(_tuple(engine.grad_layer))


def _origin(
    engine: Any,
    before: list[int],
    used: int,
    origins: dict[int, tuple[int, int]],
    now: tuple[int, int],
) -> str:
    """``"reused": [iteration, step], `` when the receive's buffer came from the pool, else ``""``.

    The engine's pool slot ``i`` is replaced when a message needs more elements; a slot that
    was not replaced by this receive is a reused buffer, first filled by the receive that
    allocated it.
    """
    pool = list(getattr(engine, "_grad_layer_buf", ()))
    reused = None
    for i, t in enumerate(pool):
        if i >= len(before) or before[i] != id(t):
            origins[i] = now
        elif reused is None and i < used and i in origins:
            reused = origins[i]
    if reused is None:
        return ""
    return f'"reused": [{reused[0]}, {reused[1]}], '


def _steps(schedule: Any) -> Iterator[list]:
    steps = getattr(schedule, "steps", None)
    return steps() if callable(steps) else iter(schedule)


def _message(exc: BaseException, frames: list) -> str:
    """``Type: text``; a bare ``assert`` says its source line and function instead of nothing."""
    text = str(exc).strip()
    if text:
        return f"{type(exc).__name__}: {text}"
    if frames:
        return f"{type(exc).__name__}: `{frames[-1].line}` failed in {frames[-1].name}"
    return type(exc).__name__


def device_type(engine: Any) -> str:
    """``cuda`` or ``cpu`` for the engine's device: a torch.device or its string (``"cuda:0"``)."""
    return str(getattr(engine, "device", "cpu")).split(":")[0]


def _shared_run_id(dist: Any) -> str:
    """One id for the whole job: torchrun's, else rank 0's, broadcast to every rank."""
    job = os.environ.get("TORCHELASTIC_RUN_ID")
    if job and job != "none":
        return job
    mine = [time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:8]]
    if dist.is_initialized():
        dist.broadcast_object_list(mine, src=0)
    return mine[0]


def instrument(
    engine: Any,
    out_dir: Union[str, Path],
    *,
    run_id: Optional[str] = None,
    clock: Optional[Clock] = None,
) -> EngineTrace:
    """Trace ``engine`` (a DeepSpeed ``PipelineEngine``) live into ``out_dir`` (see the module docstring).

    ``clock`` makes the marks; by default CUDA events when the engine's device is a GPU, else
    the host's ``perf_counter_ns``.
    """
    return EngineTrace(engine, out_dir, run_id, clock)


__all__ = ["EngineTrace", "TRACEBACK_FRAMES", "instrument"]
