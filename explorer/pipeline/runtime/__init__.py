"""The real pipeline: execute any ``Schedule`` on ``torch.distributed``, one process per rank.

Start here::

    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime import RunSpec, run_pipeline
    result = run_pipeline(RunSpec.for_schedule(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")))
    result.failure   # Failure(kind=..., rank=2, stage=2, step=6, instruction='SendGrad(buffer_id=0)', ...)

Pieces: :mod:`.spec` (what a run is), :mod:`.models` (the model contract and the built-in
examples), :mod:`.stage_state` (DeepSpeed's buffer semantics), :mod:`.p2p`, :mod:`.executor`,
:mod:`.worker` (one rank), :mod:`.launch` (this engine on the one process supervisor,
:mod:`explorer.processes`), :mod:`.result_writer` (rank 0's result, both engines),
:mod:`.torch_engine` and :mod:`.engines` (PyTorch's own engine on the same run, side by side
with ours), :mod:`.runner` (the explorer's Run control), :mod:`.deepspeed` (DeepSpeed's engine),
:mod:`.sweep_pool` (sizes checked in worker processes), :mod:`.run_folder` (a finished run
folder's files checked and read back), :mod:`.user_schedule` (a ``--from``
class read in a child). What a run leaves is read by :mod:`explorer.pipeline.traces`
(``result``, ``trace``, ``follow``).

Several machines, with ``torchrun`` (each node runs the same command; the ``explorer run``
command detects that torchrun started it and acts as one rank)::

    torchrun --nnodes 2 --nproc-per-node 2 --node-rank N --master-addr HOST0 --master-port 29500 \\
        -m explorer.cli run --kind deepspeed-train --stages 4 --microbatches 8 --out runs/seed --json

Every rank writes ``runs/seed/rank<R>.jsonl`` on its own node as it goes
(:mod:`explorer.pipeline.traces.follow` tails it); rank 0 gathers losses and gradients and prints the JSON result.
After a failure, ``explorer run --collect runs/seed --json`` on a node reads what its ranks left.

Backends: ``gloo`` on CPU (default). ``nccl`` when each rank has its own GPU (``--backend nccl``,
device ``cuda:LOCAL_RANK``). One GPU shared by several ranks: ``gloo`` with ``device="cuda"``;
every rank computes on the same GPU and each exchange goes through host memory (a device-to-host
copy, a gloo transfer, a host-to-device copy, each synchronising), and the ranks' kernels
time-slice the GPU, so expect P2P to cost tens of microseconds more per exchange and compute to
run no faster than one rank at a time. NCCL refuses two ranks on one device.

Heavy imports (torch) happen in the modules that need them, never on importing this package.
"""

from __future__ import annotations

from typing import Any

from explorer.pipeline.runtime.spec import Fault, ModelSpec, RunSpec

__all__ = [
    "Fault",
    "ModelSpec",
    "RunSpec",
    "PipelineRunResult",
    "run_pipeline",
    "Launch",
    "Follower",
    "PipelineRunner",
    "run_torch_engine",
    "compare_engines",
]


def __getattr__(name: str) -> Any:
    """Lazy exports: importing the package stays light (no torch until a run starts)."""
    if name in ("run_pipeline", "Launch", "preflight"):
        from explorer.pipeline.runtime import launch

        return getattr(launch, name)
    if name == "PipelineRunResult":
        from explorer.pipeline.traces.result import PipelineRunResult

        return PipelineRunResult
    if name == "Follower":
        from explorer.pipeline.traces.follow import Follower

        return Follower
    if name == "run_torch_engine":
        from explorer.pipeline.runtime.torch_engine import run_torch_engine

        return run_torch_engine
    if name == "compare_engines":
        from explorer.pipeline.runtime.engines import compare_engines

        return compare_engines
    if name == "PipelineRunner":
        from explorer.pipeline.runtime.runner import PipelineRunner

        return PipelineRunner
    raise AttributeError(name)
