"""One call from a scenario name (or a user's step) to a diagnosed :class:`ProbeResult`.

Shared by the CLI, the widget and the notebook, so all three run exactly the same thing.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Optional

from explorer.compile.runtime.config import PRESETS_DEVICE, parse_config
from explorer.compile.runtime.scenarios import build
from explorer.compile.runtime.sources import SourceKind
from explorer.compile.runtime.tracking import VariantTracker
from explorer.compile.traces.records import ProbeResult
from explorer.gcpause import paused_gc


def run_scenario(
    name: str,
    iterations: Optional[int] = None,
    backend: Optional[str] = None,
    config: Optional[Mapping[str, Any]] = None,
    source: SourceKind = "auto",
    ranked: bool = False,
) -> ProbeResult:
    """Build the preset ``name`` and probe it; ``backend`` overrides the config's backend.

    ``ranked``: this process is one rank of an initialised group; ranks wait for each other
    every iteration and rank 0 returns every rank's records merged (see :mod:`.distributed`).
    """
    from explorer.compile.runtime.distributed import gather, synchronised
    from explorer.compile.runtime.probe import probe

    section = dict((config or {}).get("compile", config or {}))
    if backend:
        section["backend"] = backend
    cfg = parse_config(section, device=PRESETS_DEVICE)  # a GPU in sight moves no preset tensor
    tracker = VariantTracker()
    with paused_gc():  # torch and Dynamo, without the collector's passes (explorer.gcpause)
        import torch._dynamo

    torch._dynamo.reset()
    with one_intra_op_thread():
        scenario = build(name, cfg, tracker)
        result = probe(
            synchronised(scenario.step) if ranked else scenario.step,
            iterations or scenario.preset.iterations,
            tracker=tracker,
            source=source,
            reset=True,
            dynamo_config=scenario.dynamo_config,
            backend=cfg.backend_name,
            label=name,
        )
    return gather(result, name) if ranked else result


@contextmanager
def one_intra_op_thread() -> Iterator[None]:
    """Run the block on one intra-op thread, and compile in this process, then restore both.

    The presets are tiny models that gain nothing from parallel kernels, and one thread makes
    an iteration's own time (wall less the probing thread's waits for a core) exact: with
    several, the probing thread also waits, off the run queue, for a worker that waits on it,
    and a busy machine leaks back into the clock (measured: 2 ms iterations read 55 ms own
    time beside two busy neighbours on two intra-op threads, 1.5 ms on one). Inductor sizes
    its kernels' thread count when it compiles, so the models are built and compiled inside.

    Their few small kernels are compiled here too (``compile_threads=1``): inductor's pool of
    compile workers imports torch in processes of its own before it compiles anything, which
    cost a preset probe 6 CPU-seconds of its 18 on a 2-core machine and gained nothing back.
    A user's own step keeps inductor's defaults.
    """
    import torch
    import torch._inductor.config as inductor

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with inductor.patch(compile_threads=1):
            yield
    finally:
        torch.set_num_threads(before)


def run_step(
    step: Callable[[int], Any],
    iterations: int,
    source: SourceKind = "auto",
    label: str = "",
    ranked: bool = False,
) -> ProbeResult:
    """Probe a user's own step; variants come from Dynamo's cache (the probe does not own the backend).

    ``ranked`` as for :func:`run_scenario`.
    """
    from explorer.compile.runtime.distributed import gather, synchronised
    from explorer.compile.runtime.probe import probe

    label = label or getattr(step, "__name__", "step")
    result = probe(
        synchronised(step) if ranked else step, iterations, source=source, reset=False, label=label
    )
    return gather(result, label) if ranked else result


__all__ = ["one_intra_op_thread", "run_scenario", "run_step"]
