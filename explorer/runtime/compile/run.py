"""One call from a scenario name (or a user's step) to a diagnosed :class:`ProbeResult`.

Shared by the CLI, the widget and the notebook, so all three run exactly the same thing.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from explorer.runtime.compile.config import parse_config
from explorer.runtime.compile.records import ProbeResult
from explorer.runtime.compile.scenarios import build
from explorer.runtime.compile.tracking import VariantTracker


def run_scenario(
    name: str,
    iterations: Optional[int] = None,
    backend: Optional[str] = None,
    config: Optional[Mapping[str, Any]] = None,
    source: str = "auto",
) -> ProbeResult:
    """Build the preset ``name`` and probe it; ``backend`` overrides the config's backend."""
    from explorer.runtime.compile.probe import probe

    section = dict((config or {}).get("compile", config or {}))
    if backend:
        section["backend"] = backend
    cfg = parse_config(section)
    tracker = VariantTracker()
    import torch._dynamo

    torch._dynamo.reset()
    scenario = build(name, cfg, tracker)
    return probe(
        scenario.step,
        iterations or scenario.preset.iterations,
        tracker=tracker,
        source=source,
        reset=True,
        dynamo_config=scenario.dynamo_config,
        backend=cfg.backend_name,
        label=name,
    )


def run_step(step: Callable[[int], Any], iterations: int, source: str = "auto", label: str = "") -> ProbeResult:
    """Probe a user's own step; variants come from Dynamo's cache (the probe does not own the backend)."""
    from explorer.runtime.compile.probe import probe

    return probe(step, iterations, source=source, reset=False, label=label or getattr(step, "__name__", "step"))
