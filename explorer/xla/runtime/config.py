"""What to run and how to capture it: one frozen record, validated before any process starts.

The parent validates everything it can without torch_xla (numbers, names, the shape of a
``--step`` spec), so a typo is an :class:`InputError` (CLI exit 2) in milliseconds instead of a
child that dies after importing torch_xla. The record travels to the child as JSON.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Mapping, Optional

from explorer.errors import InputError
from explorer.loading import split_ref
from explorer.xla.runtime.presets import PRESETS

FSDP_KINDS = ("v1", "v2")
MODELS = ("encoder",)
#: The ``--step`` example every message quotes.
STEP_EXAMPLE = "my_train:step or train.py:step"
#: ``PJRT_DEVICE`` names that ask for XLA on an NVIDIA GPU (``GPU`` is the older spelling).
CUDA_PJRT_DEVICES = ("CUDA", "GPU")


def refuse_xla_cuda(pjrt_device: str) -> None:
    """Refuse XLA:CUDA before a child starts: torch_xla 2.9 ships no CUDA plugin.

    Its 2.9 wheels carry XLA:CPU and XLA:TPU only (pytorch/xla #9597: the CUDA plugin was
    removed, deprecated since 2.8), so a child asked for ``PJRT_DEVICE=CUDA`` would die deep in PJRT's start-up; one
    line that says what to use instead is worth more than that traceback.
    """
    name = pjrt_device.strip().upper()
    if name in CUDA_PJRT_DEVICES:
        raise InputError(
            f"PJRT_DEVICE={name}: torch_xla 2.9 ships no XLA:CUDA plugin (pytorch/xla #9597), "
            "so XLA cannot run on a GPU; unset PJRT_DEVICE (or set CPU) for XLA:CPU, "
            "or run on a TPU host with PJRT_DEVICE=TPU"
        )


@dataclass(frozen=True)
class RunConfig:
    """One run. ``scenario`` names a preset; ``step`` (``MODULE:FUNCTION``) is a user's step instead.

    ``fsdp`` picks the wrapper: ``v1`` is ``XlaFullyShardedDataParallel`` (world size 1 on
    CPU, where collectives across several CPU devices deadlock upstream), ``v2`` the SPMD
    ``SpmdFullyShardedDataParallel`` over ``virtual_devices`` CPU devices. ``cpu_workarounds``
    applies ``pin_layout_in_collective_ops=False`` on CPU (without it, reduce-scatter bucketing
    aborts the process with ``Check failed: has_layout()``). ``live_report`` is the threshold of
    ``_xla_tensors_report`` taken before each sync (``None``: no report). ``capture=False``
    runs the same loop with no debug output at all, for the overhead benchmark.
    ``source_lines`` sets ``XLA_IR_DEBUG``/``XLA_HLO_DEBUG`` so the HLO names the Python line of
    every op; it is most of the capture's cost on a cached step (torch_xla walks the Python
    stack for every traced op). So the child records lines while graphs are new and switches
    them off (``torch_xla._XLAC._set_ir_debug``) after ``lines_settle`` steps in a row without
    a compile, and back on after a step that compiled while they were off: only the first
    occurrence of a graph that appears after the run settled lacks lines. Toggling does not
    change graph hashes (checked: no recompile). ``lines_settle=0`` keeps them on every step.
    ``save_tensors`` also sets ``XLA_SAVE_TENSORS_FILE`` (HLO of every execution, with its
    ``Graph Hash:``): the fourth artifact a user's run may leave, costly on every step.
    """

    scenario: Optional[str] = "steady"
    step: Optional[str] = None
    steps: int = 0
    model: str = "encoder"
    layers: int = 2
    width: int = 32
    batch: int = 4
    seq: int = 8
    bucket_mb: Optional[float] = None
    fsdp: str = "v1"
    virtual_devices: int = 4
    cpu_workarounds: bool = True
    fsdp_options: Mapping[str, Any] = field(default_factory=dict)
    device: Optional[str] = None
    live_report: Optional[int] = None
    capture: bool = True
    source_lines: bool = True
    lines_settle: int = 2
    save_tensors: bool = False
    timeout_s: float = 300.0
    seed: int = 0

    @property
    def label(self) -> str:
        """``steady`` or ``my_train:step``, for titles."""
        return self.step or self.scenario or "run"

    @property
    def pjrt_device(self) -> str:
        """``CPU`` unless asked otherwise (or the environment already names a device)."""
        return (self.device or os.environ.get("PJRT_DEVICE") or "CPU").upper()

    def resolved(self) -> "RunConfig":
        """Fill in the preset's defaults (steps, bucket size) and check every field."""
        cfg = self
        if cfg.step is None:
            if cfg.scenario not in PRESETS:
                raise InputError(
                    f"unknown scenario {cfg.scenario!r}: choose one of {', '.join(PRESETS)}"
                )
            preset = PRESETS[cfg.scenario]
            cfg = replace(
                cfg,
                steps=cfg.steps or preset.steps,
                bucket_mb=preset.bucket_mb if cfg.bucket_mb is None else cfg.bucket_mb,
            )
        else:
            split_ref(cfg.step, "--step", STEP_EXAMPLE, files=True)  # shape only, no import
            cfg = replace(cfg, scenario=None, steps=cfg.steps or 6)
        cfg = replace(cfg, bucket_mb=0.0 if cfg.bucket_mb is None else float(cfg.bucket_mb))
        cfg._check()
        return cfg

    def _check(self) -> None:
        refuse_xla_cuda(self.pjrt_device)
        positive = {
            "steps": self.steps,
            "layers": self.layers,
            "width": self.width,
            "batch": self.batch,
            "seq": self.seq,
            "virtual_devices": self.virtual_devices,
        }
        for name, value in positive.items():
            if not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}")
        if self.steps > 500:
            raise InputError(
                f"steps={self.steps} is more than 500: each step is a real XLA step, ask for fewer"
            )
        if self.layers > 12 or self.width > 1024:
            raise InputError(
                f"layers={self.layers}, width={self.width}: keep the model small (layers <= 12, "
                "width <= 1024); large graphs take many GB to compile on XLA:CPU"
            )
        if self.width % 2:
            raise InputError(
                f"width={self.width} must be even (the encoder uses 2 attention heads)"
            )
        if self.bucket_mb is not None and not (
            math.isfinite(self.bucket_mb) and self.bucket_mb >= 0
        ):
            raise InputError(
                f"bucket_mb must be >= 0 (0 turns reduce-scatter bucketing off), got {self.bucket_mb}"
            )
        if self.fsdp not in FSDP_KINDS:
            raise InputError(
                f"fsdp={self.fsdp!r}: choose v1 (XlaFullyShardedDataParallel) or v2 (SPMD)"
            )
        if self.model not in MODELS:
            raise InputError(f"model={self.model!r}: choose one of {', '.join(MODELS)}")
        if self.fsdp == "v2" and self.batch % self.virtual_devices:
            raise InputError(
                f"batch={self.batch} must be divisible by virtual_devices={self.virtual_devices} "
                "for SPMD FSDPv2 (the batch is sharded over the devices)"
            )
        if not isinstance(self.lines_settle, int) or self.lines_settle < 0:
            raise InputError(
                f"lines_settle must be an integer >= 0 (0 keeps source lines on), got {self.lines_settle!r}"
            )
        if not (math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 86400):
            raise InputError(
                f"timeout_s must be a finite number of seconds, more than 0 and at most a day (86400), "
                f"got {self.timeout_s}"
            )
        if self.live_report is not None and self.live_report < 0:
            raise InputError(
                f"live_report is a threshold of pending IR nodes, >= 0; got {self.live_report}"
            )

    def to_json(self) -> str:
        """The record as JSON, for the child."""
        data = asdict(self)
        data["fsdp_options"] = dict(self.fsdp_options)
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        """The inverse of :meth:`to_json`; unknown keys are an error, not ignored."""
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"unknown run option(s) {', '.join(unknown)}")
        return cls(**data)


def parse_fsdp_options(items: list[str]) -> dict[str, Any]:
    """``["flatten_parameters=false", "shard_param_on_dim_0=true"]`` -> a dict (values read as JSON)."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(
                f"--fsdp-option {item!r}: expected KEY=VALUE, e.g. flatten_parameters=false"
            )
        if not key.isidentifier():
            raise InputError(
                f"--fsdp-option {item[:60]!r}: {key[:60]!r} is not a keyword argument name"
            )
        try:
            out[key] = json.loads(value, parse_constant=_no_constant)
        except json.JSONDecodeError:
            out[key] = value
        except (ValueError, RecursionError) as exc:
            raise InputError(f"--fsdp-option {item[:60]!r}: {str(exc)[:120]}") from None
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a value an FSDP option takes (JSON has no NaN or Infinity)")


__all__ = [
    "CUDA_PJRT_DEVICES",
    "FSDP_KINDS",
    "MODELS",
    "STEP_EXAMPLE",
    "RunConfig",
    "parse_fsdp_options",
    "refuse_xla_cuda",
]
