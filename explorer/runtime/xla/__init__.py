"""Run real PyTorch/XLA steps in a child process and explain every graph they compile.

Importing this package never imports torch or torch_xla: the parent validates a
:class:`RunConfig`, launches ``python -m explorer.runtime.xla.child``, and joins what torch_xla
wrote (``PT_XLA_DEBUG_LEVEL`` blocks, ``--xla_dump_to`` HLO) with the HLO diff of
:mod:`explorer.hlo`. What runs where: PJRT CPU by default, ``XlaFullyShardedDataParallel`` at
world size 1 (collectives across several CPU devices deadlock upstream) or the SPMD FSDPv2
variant over 4 virtual CPU devices; TPU when ``PJRT_DEVICE=TPU``.

Typical use::

    from explorer.runtime.xla import run_scenario
    run = run_scenario("logging")
    [s.cause for s in run.steps]   # 'new graph: yes, because against graph 1a2b3c4d (step 1, ...'
"""

from explorer.runtime.xla.config import RunConfig, parse_fsdp_options
from explorer.runtime.xla.presets import PRESETS, Preset
from explorer.runtime.xla.run import run, run_scenario, run_step
from explorer.traces.failure import Failure
from explorer.traces.xla.records import STEP_KEYS, Graph, Step, XlaRun

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
