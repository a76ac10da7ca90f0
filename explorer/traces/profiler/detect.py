"""Register a job's per-rank profiler traces with ``explorer read`` (after run folders and TORCH_TRACE folders)."""

from __future__ import annotations

from explorer.traces.detect import Detector, register
from explorer.traces.profiler.job import looks_like_job

register(
    Detector(
        "pipeline-profile",
        "a folder of PyTorch profiler Chrome traces, one per rank (distributedInfo.rank), from a "
        "torch.distributed.pipelining job",
        looks_like_job,
        "explorer.commands.read_profile:read",
    )
)

__all__: list[str] = []
