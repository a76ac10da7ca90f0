"""One call from a scenario name (or a user's ``MODULE:FUNCTION``) to an explained :class:`XlaRun`.

Shared by the CLI, the widget, the notebook and the benchmark, so all of them run exactly the
same child with the same capture.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional

from explorer.xla.runtime.config import RunConfig
from explorer.xla.runtime.launch import Progress, launch
from explorer.xla.traces.records import XlaRun


def run(
    cfg: RunConfig,
    out_dir: Optional[str] = None,
    progress: Optional[Progress] = None,
    claimed: bool = False,
) -> XlaRun:
    """Validate ``cfg``, run it in a child process, and return its steps, graphs and explanations.

    ``progress`` is called with each message of the child (``setup``, ``begin``, ``step``,
    ``done``) as it arrives. ``out_dir`` keeps the debug file and HLO dumps (a temporary folder
    otherwise). A child that aborts or raises gives a run whose ``failure`` says why.
    ``claimed``: the caller holds ``out_dir``'s lock already (:func:`.launch.claim_folder`).
    """
    from explorer.xla.analysis.assemble import assemble

    cfg = cfg.resolved()
    child = launch(cfg, out_dir, progress, claimed)
    return assemble(child, cfg.label)


def run_scenario(
    name: str = "steady",
    steps: int = 0,
    out_dir: Optional[str] = None,
    progress: Optional[Progress] = None,
    **options: Any,
) -> XlaRun:
    """Run the preset ``name``; ``options`` are :class:`RunConfig` fields (``bucket_mb=1``, ``fsdp="v2"``)."""
    return run(replace(RunConfig(scenario=name, steps=steps), **options), out_dir, progress)


def run_step(
    spec: str,
    steps: int = 6,
    out_dir: Optional[str] = None,
    progress: Optional[Progress] = None,
    **options: Any,
) -> XlaRun:
    """Run a user's ``step(step_index)`` named ``MODULE:FUNCTION`` (or ``file.py:FUNCTION``) in the child."""
    return run(
        replace(RunConfig(scenario=None, step=spec, steps=steps), **options), out_dir, progress
    )


__all__ = ["run", "run_scenario", "run_step"]
