"""What one rank is doing, read from a live stack dump (py-spy's ``--json --locals`` form).

A hung rank's Python stack says most of what a person needs: the ``torch.distributed`` call it
waits in and with whom (``dist.recv``'s ``src``, ``dist.send``'s ``dst``), and, where it runs a
pipeline engine, the engine's own position in its schedule:

- the explorer's engine: ``RankExecutor.run`` holds ``step`` and ``iteration``,
  ``RankExecutor.execute`` the instruction's ``kind`` (an int), ``Channels.send``/``recv`` the
  peer stage (``peer``) and the channel's ``tag``; a rank in ``RankExecutor._inject`` is in a
  fault planted on purpose;
- DeepSpeed's engine: the ``_exec_*`` method names the instruction kind and holds its
  ``buffer_id``; ``deepspeed.runtime.pipe.p2p``'s ``send``/``recv`` the peer stage.

Locals are matched by name and read from py-spy's ``repr`` strings; an object py-spy cannot
print (``<Instruction at 0x...>``) is skipped, never guessed. Pure: the dump is data, the
source line of the innermost frame comes in with it (``Frame.source``) so that a sleep is told
from a wait without reading files here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence

from explorer.pipeline.schedules.instructions import Kind

#: What a rank does: the first five read from a stack (``compiling``: inside torch.compile's
#: compilation of a frame, its first or a recompile), ``stopped`` (its process stands stopped
#: by a signal, state T: it will not move by itself, whatever its stack shows), ``gone`` (no
#: process), ``unseen`` (no stack), ``done`` (its Flight Recorder dump says its last collective
#: completed: it waited in none when it dumped) and ``finished`` (no process, and its own file's
#: last line says it ran to its end).
Activity = Literal[
    "waiting",
    "compiling",
    "computing",
    "sleeping",
    "idle",
    "stopped",
    "gone",
    "unseen",
    "done",
    "finished",
    "starting",  # no process seen, no start line yet, while its launcher runs
]
#: ``torch.distributed`` calls that pair two ranks, and the local naming the peer.
P2P_CALLS = {
    "send": "dst",
    "isend": "dst",
    "recv": "src",
    "irecv": "src",
    "send_object_list": "dst",
    "recv_object_list": "src",
}
#: DeepSpeed's pipeline instructions, by the engine method that executes them.
DEEPSPEED_METHODS = {
    "_exec_load_micro_batch": Kind.LOAD,
    "_exec_forward_pass": Kind.FORWARD,
    "_exec_backward_pass": Kind.BACKWARD,
    "_exec_send_activations": Kind.SEND_ACTIVATION,
    "_exec_recv_activations": Kind.RECV_ACTIVATION,
    "_exec_send_grads": Kind.SEND_GRAD,
    "_exec_recv_grads": Kind.RECV_GRAD,
    "_exec_reduce_grads": Kind.REDUCE_GRADS,
    "_exec_reduce_tied_grads": Kind.REDUCE_TIED_GRADS,
    "_exec_optimizer_step": Kind.OPTIMIZER_STEP,
}
_C10D = "torch/distributed/distributed_c10d.py"
_EXPLORER_P2P = "explorer/pipeline/runtime/p2p.py"
_EXPLORER_EXECUTOR = "explorer/pipeline/runtime/executor.py"
_DEEPSPEED_ENGINE = "deepspeed/runtime/pipe/engine.py"
_DEEPSPEED_P2P = "deepspeed/runtime/pipe/p2p.py"
_TORCH_SCHEDULES = "torch/distributed/pipelining/schedules.py"
_TORCH_STAGE = "torch/distributed/pipelining/stage.py"
#: What a PyTorch pipelining schedule waits on, by the ``desc`` it gives its batched P2P ops
#: (longest first: ``fwd_send_bwd_recv`` holds ``fwd_send``): the transfer it waits for, and
#: whether its peer is the next stage (+1) or the previous one (-1).
TORCH_TRANSFERS = {
    "fwd_send_bwd_recv": ("the gradient from the next stage", +1),
    "bwd_send_fwd_recv": ("the activation from the previous stage", -1),
    "fwd_recv": ("the activation from the previous stage", -1),
    "bwd_recv": ("the gradient from the next stage", +1),
    "fwd_send": ("its activation sends to the next stage", +1),
    "bwd_send": ("its gradient sends to the previous stage", -1),
}
#: PyTorch pipelining's stage methods, by the kind of work they do.
TORCH_STAGE_METHODS = {
    "forward_one_chunk": Kind.FORWARD,
    "backward_one_chunk": Kind.BACKWARD,
    "backward_weight_one_chunk": Kind.BACKWARD_WEIGHT,
}
#: Frames only a compilation has: Dynamo converting a frame (a first compile or a recompile),
#: and Inductor compiling a graph (also AOTAutograd's backward graph, compiled at the first
#: backward, when no Dynamo frame is on the stack). Running compiled code has neither: its
#: ``eval_frame`` wrapper alone does not make a rank "compiling".
_COMPILING = ("torch/_dynamo/convert_frame.py", "torch/_inductor/compile_fx.py")
#: Paths of library code: the user's own file and line is the innermost frame outside them.
_LIBRARY_MARKS = (
    "/site-packages/",
    "/dist-packages/",
    "<frozen",
    "/lib/python3",
    "/torch/",
    "/deepspeed/",
)


@dataclass(frozen=True)
class Frame:
    """One Python frame: function, file, line, printable locals and the line's source text."""

    function: str
    file: str
    line: int
    locals: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    #: The few source lines above this one (nearest last): what a loop's wait was made for.
    context: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The bare function name (py-spy qualifies methods: ``RankExecutor.run``)."""
        return self.function.rsplit(".", 1)[-1]

    def in_file(self, suffix: str) -> bool:
        return self.file.replace("\\", "/").endswith(suffix)

    def int_local(self, *names: str) -> Optional[int]:
        """The first of ``names`` that holds a plain int (py-spy prints ints as digits)."""
        for name in names:
            text = self.locals.get(name)
            if text is not None and text.lstrip("-").isdigit():
                return int(text)
        return None

    def where(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class StackReading:
    """What a rank's stack says: its activity, the call and peer it waits on, its engine position.

    ``activity``: ``waiting`` (in a ``torch.distributed`` call or a wait on one), ``compiling``
    (inside torch.compile's compilation), ``sleeping`` (idle at a ``sleep(`` line), ``idle``
    (blocked in native code elsewhere) or ``computing``.
    Engine fields are None where the stack does not hold them.
    """

    activity: Activity
    op: str = ""  # the torch.distributed call (send, recv, all_reduce, ...) or "wait"
    peer_rank: Optional[int] = None
    tag: Optional[int] = None
    engine: str = ""  # "explorer", "deepspeed" or "" (a user's own script)
    step: Optional[int] = None
    iteration: Optional[int] = None
    kind: Optional[Kind] = None
    buffer: Optional[int] = None
    peer_stage: Optional[int] = None
    where: str = ""  # file:line of the innermost frame outside the libraries
    function: str = ""
    fault: bool = False  # inside the explorer's planted fault
    #: PyTorch pipelining (``engine == "torch"``): the schedule class's frame says these.
    microbatch: Optional[int] = None
    stage: Optional[int] = None  # the stage index of the action (multi-stage schedules)
    action_index: Optional[int] = None  # ``time_step``: the action's place in the rank's order
    transfer: str = ""  # the ``desc`` of the batched P2P ops it waits on (``fwd_recv``...)


#: Source lines read above a frame's line (a loop's wait is two lines under what it waits for).
CONTEXT_LINES = 3


def frames_from_pyspy(thread: Mapping[str, Any], source=None) -> list[Frame]:
    """py-spy's JSON frames (innermost first) as :class:`Frame`; a frame's own ``source`` and
    ``context`` (a saved stack's, a traceback's line) come first, else ``source(file, line)``
    gives the line's text (and the lines above, as context)."""
    out = []
    for f in thread.get("frames") or []:
        file, line = str(f.get("filename", "")), int(f.get("line") or 0)
        local = {str(v.get("name")): str(v.get("repr", "")) for v in f.get("locals") or []}
        text = f.get("source") or (source(file, line) if source is not None else "")
        above = f.get("context")
        if not isinstance(above, (list, tuple)):
            above = (
                tuple(source(file, n) or "" for n in range(max(1, line - CONTEXT_LINES), line))
                if source is not None
                else ()
            )
        out.append(
            Frame(
                str(f.get("name", "")), file, line, local, str(text or ""), tuple(map(str, above))
            )
        )
    return out


def main_thread(dump: Sequence[Mapping[str, Any]], pid: int) -> Mapping[str, Any]:
    """The thread that runs the job: the one whose OS id is the pid, else the first with frames."""
    for thread in dump:
        if thread.get("os_thread_id") == pid or thread.get("thread_name") == "MainThread":
            return thread
    return next((t for t in dump if t.get("frames")), dump[0] if dump else {})


def read_stack(frames: Sequence[Frame], active: bool) -> StackReading:
    """The :class:`StackReading` of one thread's frames (innermost first)."""
    call = next((f for f in frames if f.in_file(_C10D) and "wrapper" not in f.function), None)
    user = next((f for f in frames if not _library(f)), frames[0] if frames else None)
    engine = _engine_position(frames)
    op, peer, tag = "", None, None
    if call is not None:
        op = call.name
        peer = call.int_local(P2P_CALLS[op]) if op in P2P_CALLS else None
        if peer is None and op in P2P_CALLS:
            peer = _peer_in_call_line(frames, op)
        tag = call.int_local("tag")
    elif any(f.in_file(_EXPLORER_P2P) and f.name == "drain" for f in frames):
        op = "wait"  # posted sends waited at the end of an iteration
    elif frames and not active and ".wait(" in frames[0].source:
        op = "wait"  # a Work handle's wait(): native, so the caller is the innermost frame
    compiling = any(mark in f.file.replace("\\", "/") for f in frames for mark in _COMPILING)
    activity: Activity = (
        "waiting"
        if op
        else "compiling"
        if compiling
        else "computing"
        if active
        else "sleeping"
        if frames and "sleep(" in frames[0].source
        else "idle"
    )
    return StackReading(
        activity=activity,
        op=op,
        peer_rank=peer,
        tag=tag,
        where=user.where() if user else "",
        function=user.function if user else "",
        **engine,
    )


def _peer_in_call_line(frames: Sequence[Frame], op: str) -> Optional[int]:
    """The peer a caller's line names as a literal (``dist.recv(t, src=0)``): a stack without
    locals (a traceback, a dump taken without ``--locals``) still says whom the rank waited on."""
    name = P2P_CALLS[op]
    pattern = re.compile(rf"\b{op}\(.*\b{name}\s*=\s*(\d+)\b")
    for f in frames:
        m = pattern.search(f.source)
        if m is not None:
            return int(m.group(1))
    return None


def _library(frame: Frame) -> bool:
    path = frame.file.replace("\\", "/")
    return any(mark in path for mark in _LIBRARY_MARKS) and "/explorer/" not in path


def _engine_position(frames: Sequence[Frame]) -> dict[str, Any]:
    """The pipeline engine's position from its frames' locals (explorer's or DeepSpeed's)."""
    out: dict[str, Any] = {}
    for f in frames:
        if f.in_file(_EXPLORER_EXECUTOR):
            out["engine"] = "explorer"
            if f.name == "run":
                out["step"], out["iteration"] = f.int_local("step"), f.int_local("iteration")
            elif f.name == "execute":
                value = f.int_local("kind")
                out["kind"] = Kind(value) if value is not None and 0 <= value < len(Kind) else None
            elif f.name == "_inject":
                out["fault"] = True
                out["step"] = f.int_local("step")
        elif f.in_file(_EXPLORER_P2P) and f.name in ("send", "recv"):
            out["peer_stage"] = f.int_local("peer")
        elif f.in_file(_DEEPSPEED_ENGINE) and f.name in DEEPSPEED_METHODS:
            out["engine"] = "deepspeed"
            out["kind"] = DEEPSPEED_METHODS[f.name]
            out["buffer"] = f.int_local("buffer_id")
        elif f.in_file(_DEEPSPEED_P2P) and f.name in ("send", "recv"):
            # both names are locals of both functions: the argument is the peer, the other is us
            out["peer_stage"] = f.int_local("dest_stage" if f.name == "send" else "src_stage")
        elif f.in_file(_TORCH_STAGE) and f.name in TORCH_STAGE_METHODS and "kind" not in out:
            out["engine"], out["kind"] = "torch", TORCH_STAGE_METHODS[f.name]
        elif f.in_file(_TORCH_SCHEDULES) and f.name == "_step_microbatches":
            out.update(_torch_position(f, out.get("kind")))
    return out


def _torch_position(f: Frame, kind: Optional[Kind]) -> dict[str, Any]:
    """Where a PyTorch pipelining schedule stands, from its ``_step_microbatches`` frame.

    Multi-stage schedules and ``_PipelineScheduleRuntime`` hold ``time_step`` (the action's
    place in the rank's order), ``stage_idx`` and ``mb_index``; the single-stage ones (GPipe,
    1F1B) a micro-batch counter per direction (``i``, ``fwd_mb_index``, ``bwd_mb_index``). The
    transfer waited on is the ``desc`` its batched P2P ops were given, on the line or just above.
    """
    transfer = next(
        (t for line in (f.source, *reversed(f.context)) for t in TORCH_TRANSFERS if t in line),
        "",
    )
    if kind is not None:  # computing: the stage method says which way
        backward = kind in (Kind.BACKWARD, Kind.BACKWARD_INPUT, Kind.BACKWARD_WEIGHT)
    else:  # waiting: for a gradient, or on its gradient sends
        backward = transfer in ("bwd_recv", "fwd_send_bwd_recv", "bwd_send")
    counters = ("bwd_mb_index",) if backward else ("fwd_mb_index",)
    return {
        "engine": "torch",
        "transfer": transfer,
        "action_index": f.int_local("time_step"),
        "stage": f.int_local("stage_idx"),
        "microbatch": f.int_local("mb_index", *counters, "i"),
    }


__all__ = [
    "Activity",
    "CONTEXT_LINES",
    "TORCH_STAGE_METHODS",
    "TORCH_TRANSFERS",
    "DEEPSPEED_METHODS",
    "P2P_CALLS",
    "Frame",
    "StackReading",
    "frames_from_pyspy",
    "main_thread",
    "read_stack",
]
