"""``explorer run --engine deepspeed``: the launcher side of a run on DeepSpeed's own engine.

No launcher of its own: the ranks are started and watched by the explorer's
:class:`~explorer.pipeline.runtime.launch.Launch` (torchrun's environment, one session per
rank, every rank ended a short grace after the first failure, even a failing rank that stays
alive), running :mod:`.worker` instead of the explorer's worker. The folder it leaves is an
ordinary run folder, read by the same collector: same JSON contract, plus ``engine`` and
``deepspeed_version``.

The failure reported is the first in time across ranks (each rank stamps its failure line
with the wall clock; the ranks share a host), with DeepSpeed's own exception type, message and
the last frames of its traceback (``exception_type``, ``traceback_tail``); every later failure
on another rank is listed under ``consequences`` (a neighbour's gloo "Connection closed by
peer" after the failing rank left is kind ``peer``, never the cause).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import replace
from pathlib import Path
from typing import Optional, Union

from explorer.errors import InputError
from explorer.pipeline.runtime.deepspeed.schedules import unrunnable
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.traces.result import PipelineRunResult


def deepspeed_version() -> Optional[str]:
    """The installed DeepSpeed's version, without importing it (None when it is not installed)."""
    try:
        return importlib.metadata.version("deepspeed")
    except importlib.metadata.PackageNotFoundError:
        return None


def check_runnable(spec: RunSpec) -> None:
    """One InputError when DeepSpeed is missing or its engine cannot run this schedule."""
    if deepspeed_version() is None:
        raise InputError(
            "--engine deepspeed needs the deepspeed package: pip install --no-build-isolation "
            "deepspeed==0.19.8 (make install does it)"
        )
    why = unrunnable(spec.build_schedule())
    if why:
        raise InputError(f"--engine deepspeed: {why}")
    if spec.fault is not None and spec.fault.how in ("kill", "hang", "stop"):
        raise InputError("--engine deepspeed injects only raise and linger faults")


def run_deepspeed_engine(
    spec: RunSpec,
    folder: Union[None, str, Path] = None,
    *,
    progress=None,
    timeout_s: Optional[float] = None,
) -> PipelineRunResult:
    """Run ``spec`` on DeepSpeed's ``PipelineEngine`` (see the module docstring)."""
    from explorer.pipeline.runtime.launch import Launch, _validate_model

    check_runnable(spec)
    spec = replace(spec, engine="deepspeed")
    _validate_model(spec)
    result = Launch(spec, folder).start(timeout_s).wait(progress)
    return annotate(result)


def annotate(result: PipelineRunResult) -> PipelineRunResult:
    """Add the engine and DeepSpeed's version (read from the ranks' ``start`` lines)."""
    starts = [e for e in _events(result) if e.get("type") == "start"]
    result.details["engine"] = "deepspeed"
    result.details["deepspeed_version"] = next(
        (e["deepspeed_version"] for e in starts if e.get("deepspeed_version")), deepspeed_version()
    )
    return result


def _events(result: PipelineRunResult) -> list[dict]:
    from explorer.pipeline.traces.follow import Follower

    if result.folder is None:
        return []
    follower = Follower(result.folder, result.details.get("run_id"))
    follower.poll()
    return follower.events


__all__ = ["annotate", "check_runnable", "deepspeed_version", "run_deepspeed_engine"]
