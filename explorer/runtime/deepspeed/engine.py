"""``explorer run --engine deepspeed``: the launcher side of a run on DeepSpeed's own engine.

No launcher of its own: the ranks are started and watched by the explorer's
:class:`~explorer.runtime.pipeline.launch.Launch` (torchrun's environment, one session per
rank, every rank ended a short grace after the first failure, even a failing rank that stays
alive), running :mod:`.worker` instead of the explorer's worker. The folder it leaves is an
ordinary run folder, read by the same collector: same JSON contract, plus ``engine`` and
``deepspeed_version``.

The failure reported is the first in time across ranks (each rank stamps its failure line
with the wall clock; the ranks share a host), with DeepSpeed's own exception type, message and
the last frames of its traceback; every later failure on another rank is listed under
``consequences`` (a neighbour's gloo "Connection closed by peer" after the failing rank left).
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import replace
from pathlib import Path
from typing import Optional, Union

from explorer.errors import InputError
from explorer.runtime.deepspeed.schedules import unrunnable
from explorer.runtime.pipeline.spec import RunSpec
from explorer.traces.pipeline.result import RunResult

#: Seconds of silence allowed before the first record: 4 processes importing torch and
#: deepspeed and building the engine take about 13 s on 2 cores, more when the machine is busy.
STARTUP_S = 120.0


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
    if spec.fault is not None and spec.fault.how in ("kill", "hang"):
        raise InputError("--engine deepspeed injects only raise and linger faults")


def run_deepspeed_engine(
    spec: RunSpec,
    folder: Union[None, str, Path] = None,
    *,
    progress=None,
    timeout_s: Optional[float] = None,
) -> RunResult:
    """Run ``spec`` on DeepSpeed's ``PipelineEngine`` (see the module docstring)."""
    from explorer.runtime.pipeline.launch import Launch, _validate_model

    check_runnable(spec)
    spec = replace(spec, engine="deepspeed")
    _validate_model(spec)
    result = Launch(spec, folder, startup_s=STARTUP_S).start().wait(progress, timeout_s)
    return annotate(result)


def annotate(result: RunResult) -> RunResult:
    """Add the engine, DeepSpeed's version, and the first failure's exception and consequences."""
    starts = [e for e in _events(result) if e.get("type") == "start"]
    result.details["engine"] = "deepspeed"
    result.details["deepspeed_version"] = next(
        (e["deepspeed_version"] for e in starts if e.get("deepspeed_version")), deepspeed_version()
    )
    failures = sorted(result.details.get("failures", []), key=lambda e: e.get("time", 0.0))
    if result.failure is not None and failures:
        result.failure = first_failure(result.failure, failures)
    return result


def first_failure(failure: dict, failures: list[dict]) -> dict:
    """``failure`` with the earliest failure line's exception and traceback, and the rest as consequences."""
    first = failures[0]
    out = dict(failure)
    if first.get("rank") == failure.get("rank"):
        out["exception"] = first.get("exception")
        out["traceback"] = first.get("traceback", [])
        out["message"] = first["message"]
        out["iteration"] = first.get("iteration")
        out["time"] = first.get("time")
    out["consequences"] = [
        {
            "rank": e["rank"],
            "stage": e.get("stage"),
            "step": e.get("step"),
            "instruction": e.get("instruction"),
            "exception": e.get("exception"),
            "message": e["message"],
            "after_s": round(e.get("time", 0.0) - first.get("time", 0.0), 6),
        }
        for e in failures
        if e is not first
    ]
    return out


def _events(result: RunResult) -> list[dict]:
    from explorer.traces.pipeline.follow import Follower

    if result.folder is None:
        return []
    follower = Follower(result.folder, result.details.get("run_id"))
    follower.poll()
    return follower.events


__all__ = ["STARTUP_S", "annotate", "check_runnable", "deepspeed_version", "run_deepspeed_engine"]
