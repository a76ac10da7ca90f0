"""Named presets: small real training loops that each show one way torch.compile misbehaves.

Each preset is an example of what a user brings with ``--step MODULE:FUNCTION``: a function
``step(iteration)`` that runs one training iteration of a compiled model. The models are tiny
so the whole set runs on two CPU cores, but everything is real: real ``torch.compile``, real
guards, real recompiles. ``build(name, config, tracker)`` returns the step plus the Dynamo
settings the preset needs (``limit`` lowers ``recompile_limit`` so it is reached quickly).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Optional

from explorer.compile.runtime.config import CompileConfig
from explorer.compile.runtime.tracking import VariantTracker
from explorer.errors import InputError


@dataclass(frozen=True)
class Preset:
    """What a preset teaches, and the defaults it runs with."""

    name: str
    summary: str
    iterations: int
    expect: str
    dynamo_config: Mapping[str, Any] = field(default_factory=dict)
    compile_kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Scenario:
    """A built preset: the step to probe and the settings to probe it with."""

    preset: Preset
    step: Callable[[int], None]
    model: Any
    config: CompileConfig

    @property
    def dynamo_config(self) -> Mapping[str, Any]:
        return self.preset.dynamo_config


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "cycling",
            "a module attribute cycles through 3 values, one of them doing more work "
            "(the seed: 196, 196, 192 TFLOPS)",
            24,
            "cycling",
        ),
        Preset(
            "shapes",
            "the sequence length grows every 3 iterations with dynamic=False "
            "(curriculum learning): a new shape each time",
            18,
            "recompiles",
            compile_kwargs={"dynamic": False},
        ),
        Preset(
            "graph-break",
            "a loss value is read with .item() inside forward for logging",
            12,
            "steady",
        ),
        Preset(
            "zero3-hooks",
            "ZeRO-3-style forward pre/post hooks gather and release parameters, "
            "wrapped in torch.compiler.disable",
            12,
            "steady",
        ),
        Preset(
            "limit",
            "a value cycles through 6 states with recompile_limit=4: two states never "
            "get a compiled variant",
            24,
            "eager-fallback",
            dynamo_config={"recompile_limit": 4},
        ),
        Preset(
            "accumulation",
            "gradient accumulation over 3 iterations: the optimizer step runs "
            "every 3rd iteration, outside the compiled model",
            45,
            "unrelated",
        ),
        Preset(
            "deepspeed",
            "DeepSpeed's own engine with engine.compile() and a value cycling "
            "through 3 states (needs the deepspeed package)",
            18,
            "cycling",
        ),
        Preset(
            "deepspeed-zero3",
            "the same engine with ZeRO stage 3: its hooks gather and release parameters "
            "around every module, and Dynamo compiles, guards and gives up on them (needs deepspeed; "
            "run it with --nproc 2)",
            9,
            "eager-fallback",
        ),
    )
}


def _models() -> Any:
    """The scenario models, defined on first use so that importing this module needs no torch."""
    from explorer.compile.runtime import models

    return models


def build(name: str, config: CompileConfig, tracker: Optional[VariantTracker] = None) -> Scenario:
    """Build the preset ``name`` with ``config`` (its ``compile_kwargs`` fill in what the user left out)."""
    if name not in PRESETS:
        raise InputError(f"unknown scenario {name!r}: choose one of {', '.join(PRESETS)}")
    preset = PRESETS[name]
    kwargs = {**preset.compile_kwargs, **config.kwargs}
    config = replace(config, kwargs=kwargs)
    builder = getattr(_models(), "build_" + name.replace("-", "_"))
    model, step = builder(config, tracker)
    return Scenario(preset, step, model, config)


__all__ = ["Preset", "Scenario", "PRESETS", "build"]
