"""The named scenarios: each an example of the user-step interface ``step(step_index) -> None``.

This module is metadata only (what a preset shows, how many steps it needs, what a user should
expect), so the parent, the CLI's ``--help`` and the widget's dropdown can list presets
without torch. The steps themselves are built in the child by
:mod:`explorer.xla.runtime.steps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Preset:
    """What a preset teaches, and the defaults it runs with."""

    name: str
    summary: str
    steps: int
    expect: str
    bucket_mb: Optional[float] = None


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "steady",
            "a plain FSDP loop (SGD with momentum): the first step compiles the graph without "
            "momentum buffers, the second the steady graph, then nothing compiles",
            6,
            "settles",
        ),
        Preset(
            "bucketed-nested",
            "reduce-scatter bucketing with nested FSDP (each encoder layer wrapped, then "
            "the whole), the mechanism of the seed thread",
            6,
            "settles",
            bucket_mb=1.0,
        ),
        Preset(
            "logging",
            "every third step keeps a gradient-norm tensor for logging: that step's graph carries "
            "the extra ops, so the program changes from step to step",
            8,
            "recompiles",
        ),
        Preset(
            "scalar",
            "a Python loss weight that equals another scalar on odd steps: torch_xla shares equal "
            "scalars, so only the parameter count changes",
            6,
            "recompiles",
        ),
        Preset(
            "deferred-callbacks",
            "each step queues one callback per gradient and the queue runs once more than a "
            "step's worth waits, so which tensors are live at the sync alternates from step to "
            "step (the maintainers' theory in the seed thread, without collectives)",
            8,
            "recompiles",
        ),
        Preset(
            "shape-change",
            "the sequence length grows at step 3 (an input shape change)",
            6,
            "recompiles",
        ),
    )
}

__all__ = ["Preset", "PRESETS"]
