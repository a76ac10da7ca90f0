"""A job's per-rank profiler traces, as a kind ``explorer read`` recognises."""

from __future__ import annotations

from explorer.detect import Detector
from explorer.pipeline.traces.profiler.job import looks_like_job, rankless

PROFILE = Detector(
    "pipeline-profile",
    "a folder of PyTorch profiler Chrome traces, one per rank (distributedInfo.rank), from a "
    "torch.distributed.pipelining job",
    looks_like_job,
    rankless,
)

__all__ = ["PROFILE"]
