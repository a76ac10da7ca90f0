"""Run real PyTorch/XLA steps in a child process and explain every graph they compile.

Importing this package never imports torch or torch_xla: the parent validates a
:class:`RunConfig`, launches ``python -m explorer.xla.runtime.child``, and joins what torch_xla
wrote (``PT_XLA_DEBUG_LEVEL`` blocks, ``--xla_dump_to`` HLO) with the HLO diff of
:mod:`explorer.xla.hlo`. What runs where: PJRT CPU by default, ``XlaFullyShardedDataParallel`` at
world size 1 (collectives across several CPU devices deadlock upstream) or the SPMD FSDPv2
variant over 4 virtual CPU devices; TPU when ``PJRT_DEVICE=TPU``. No GPU: torch_xla 2.9 ships no
XLA:CUDA plugin (pytorch/xla #9597), so ``PJRT_DEVICE=CUDA`` (or ``GPU``) is refused before a
child starts (:func:`~explorer.xla.runtime.config.refuse_xla_cuda`).

On a TPU the child is still one process, with no ``xmp.spawn`` or torchrun: the v1 step runs at
world size 1 on one chip. Such a run covers what XLA:TPU compiles at each step and why (the
graphs, their causes, the HLO diffs), with FSDP's wrapping and collective ops in the graph; it
does not cover sharding across chips or hosts, nor the timing or hangs of real collectives
between them, which need one process per chip. ``fsdp="v2"`` (SPMD) meshes over every device
the one process sees. Neither variant has yet run on a TPU.

Typical use::

    from explorer.xla.runtime import run_scenario
    run = run_scenario("logging")
    [s.cause for s in run.steps]   # 'new graph: yes, because against graph 1a2b3c4d (step 1, ...'
"""

from explorer.failure import Failure
from explorer.xla.runtime.config import RunConfig, parse_fsdp_options
from explorer.xla.runtime.presets import PRESETS, Preset
from explorer.xla.runtime.run import run, run_scenario, run_step
from explorer.xla.traces.records import STEP_KEYS, Graph, Step, XlaRun

__all__ = [
    "PRESETS",
    "Preset",
    "RunConfig",
    "STEP_KEYS",
    "Failure",
    "Graph",
    "Step",
    "XlaRun",
    "parse_fsdp_options",
    "run",
    "run_scenario",
    "run_step",
]
