"""The torch.compile recompile probe: which iterations compile, why, and the period of a slowdown.

Importing this package does not import torch: the pure parts (records, period detection,
diagnosis, config validation, the preset list) load eagerly, and everything that runs
torch is reached through functions that import it when called.

Typical use::

    from explorer.compile.runtime import run_scenario
    result = run_scenario("cycling", iterations=24)
    result.diagnosis.sentence   # 'Cycling among 3 cached variants every 3 iterations: ...'
"""

from explorer.compile.analysis.diagnosis import diagnose
from explorer.compile.analysis.period import label_period, time_period
from explorer.compile.runtime.config import CompileConfig, default_backend, parse_config
from explorer.compile.runtime.run import run_scenario, run_step
from explorer.compile.runtime.scenarios import PRESETS
from explorer.compile.traces.records import (
    CompileEvent,
    Diagnosis,
    GraphBreak,
    Iteration,
    ProbeResult,
    VariantGuards,
)
from explorer.user_step import load_step

__all__ = [
    "CompileConfig",
    "CompileEvent",
    "Diagnosis",
    "GraphBreak",
    "Iteration",
    "PRESETS",
    "ProbeResult",
    "VariantGuards",
    "default_backend",
    "diagnose",
    "label_period",
    "load_step",
    "parse_config",
    "run_scenario",
    "run_step",
    "time_period",
]
