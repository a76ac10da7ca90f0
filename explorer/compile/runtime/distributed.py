"""The probe as one rank of a ``torch.distributed`` job: every rank probes, rank 0 merges.

Inside the user's own ``torchrun`` job (or the ranks ``compile-probe --nproc N`` starts),
:func:`probe_rank` runs the probe on this rank's step, then gathers every rank's records to
rank 0 over the job's default process group (``gather_object``), where they merge into one
report (:func:`~explorer.compile.analysis.ranks.merge_ranks`). Other ranks get their own
records back. Outside an initialised group it is the plain probe. torch is imported when called.
"""

from __future__ import annotations

from typing import Any, Callable

from explorer.compile.analysis.ranks import merge_ranks
from explorer.compile.traces.records import ProbeResult


def world() -> tuple[int, int]:
    """``(rank, world size)`` of the initialised default group, ``(0, 1)`` without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def synchronised(step: Callable[[int], Any]) -> Callable[[int], Any]:
    """``step`` followed by an all-reduce of one value, so ranks wait for each other every iteration.

    Data-parallel training ends each iteration in a gradient all-reduce; the presets' own
    models do not, so this stands in for it: one rank's compile then stalls the others, as in
    a real job. With one rank it is ``step`` itself.
    """
    rank, size = world()
    if size == 1:
        return step
    import torch
    import torch.distributed as dist

    flag = torch.zeros(1)

    def step_then_wait(iteration: int) -> Any:
        out = step(iteration)
        dist.all_reduce(flag)
        return out

    step_then_wait.__name__ = getattr(step, "__name__", "step")
    return step_then_wait


def gather(result: ProbeResult, label: str = "") -> ProbeResult:
    """Every rank's ``result`` merged on rank 0 (each rank gets its own back elsewhere)."""
    rank, size = world()
    if size == 1:
        return merge_ranks({0: result}, label or result.label)
    import torch.distributed as dist

    results: list[Any] = [None] * size if rank == 0 else []
    dist.gather_object(result, results if rank == 0 else None, dst=0)
    if rank != 0:
        return result
    return merge_ranks(
        {r: res for r, res in enumerate(results)}, label or f"{result.label} on {size} ranks"
    )


def probe_rank(step: Callable[[int], Any], iterations: int, **probe_kwargs: Any) -> ProbeResult:
    """Probe ``step`` on this rank and merge every rank's records on rank 0 (see the module docstring).

    Call it on every rank of the job, with the same ``iterations``: the gather is collective.
    """
    from explorer.compile.runtime.probe import probe

    return gather(probe(step, iterations, **probe_kwargs), probe_kwargs.get("label", ""))


__all__ = ["world", "synchronised", "gather", "probe_rank"]
