"""What a rank sets before torch touches a device, so that its run is reproducible and its stalls are named.

- ``CUBLAS_WORKSPACE_CONFIG``: with ``torch.use_deterministic_algorithms(True)`` torch refuses
  the first cuBLAS matrix product unless this is set (cuBLAS otherwise picks its reduction order
  per call). ``:4096:8`` is the value NVIDIA documents for reproducible results.
- ``TORCH_NCCL_BLOCKING_WAIT=1`` (NCCL only): a send or receive then blocks the host until it
  completes or the stall timeout passes, and raises *in the instruction that waited*. Without it,
  NCCL queues the exchange and returns, a stuck one surfaces at the next synchronisation, and the
  watchdog aborts the process without a word about where it stopped.

The worker applies them itself at its start (they must be in place before the process group and
the first product), so a rank started by the explorer's launcher and one started by a user's
``torchrun`` behave alike. A value the user set is kept.
"""

from __future__ import annotations

import os
from typing import Mapping, MutableMapping

#: NVIDIA's documented value for deterministic cuBLAS: eight workspaces of 4096 KiB.
CUBLAS_WORKSPACE = ":4096:8"


def rank_environment(backend: str, device: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a rank on ``backend``/``device`` needs that ``environ`` does not set yet."""
    wanted: dict[str, str] = {}
    if device == "cuda":
        wanted["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE
    if backend == "nccl":
        wanted["TORCH_NCCL_BLOCKING_WAIT"] = "1"
    return {k: v for k, v in wanted.items() if k not in environ}


def prepare_rank(
    backend: str, device: str, threads: int, environ: MutableMapping[str, str] = os.environ
) -> None:
    """Set the rank's variables, its thread count and deterministic algorithms, in that order."""
    import torch

    environ.update(rank_environment(backend, device, environ))
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


def gpu_index(local_rank: int, gpus: int) -> int:
    """The GPU of the ``local_rank``-th rank on its machine: ranks beyond the GPUs share them in turn.

    NCCL runs are refused before launch when ranks outnumber GPUs (two ranks may not share a GPU
    there); gloo ranks may share one, and ``LOCAL_RANK`` as a device ordinal would then not exist.
    """
    return local_rank % max(gpus, 1)


__all__ = ["CUBLAS_WORKSPACE", "gpu_index", "rank_environment", "prepare_rank"]
