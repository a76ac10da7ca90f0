"""The small BERT-like encoder and its FSDP wrapping (child process only: imports torch_xla).

The seed's recompiles needed *nested* FSDP (each layer wrapped, then the whole) with
reduce-scatter bucketing, so the encoder is wrapped exactly that way. It is kept small
(default 2 layers of width 32): a 35,000-instruction graph took over 18 GB to compile on
XLA:CPU. Workarounds applied on CPU are returned by name so the run can report them.
"""

from __future__ import annotations

from typing import Any, Mapping

from explorer.errors import InputError
from explorer.xla.runtime.config import RunConfig

VOCAB = 64

#: Applied on CPU unless ``cpu_workarounds=False``; each says what breaks without it.
CPU_WORKAROUNDS = {
    "pin_layout_in_collective_ops": (
        False,
        "reduce-scatter bucketing aborts with 'Check failed: has_layout()' on PJRT CPU otherwise",
    ),
}


def build_encoder(torch: Any, cfg: RunConfig) -> Any:
    """Token and position embeddings, ``cfg.layers`` post-norm encoder layers, a masked-LM head."""
    nn = torch.nn

    class Layer(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            self.attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.norm1 = nn.LayerNorm(width)
            self.ff = nn.Sequential(
                nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width)
            )
            self.norm2 = nn.LayerNorm(width)

        def forward(self, x: Any) -> Any:
            x = self.norm1(x + self.attn(x, x, x, need_weights=False)[0])
            return self.norm2(x + self.ff(x))

    class Encoder(nn.Module):
        def __init__(self, width: int, layers: int, seq: int) -> None:
            super().__init__()
            self.tokens = nn.Embedding(VOCAB, width)
            self.positions = nn.Embedding(4 * seq, width)
            self.layers = nn.ModuleList(Layer(width) for _ in range(layers))
            self.head = nn.Linear(width, VOCAB)

        def forward(self, ids: Any) -> Any:
            pos = torch.arange(ids.shape[1], device=ids.device)
            h = self.tokens(ids) + self.positions(pos)
            for layer in self.layers:
                h = layer(h)
            return self.head(h)

    return Encoder(cfg.width, cfg.layers, cfg.seq)


def fsdp_kwargs(cfg: RunConfig, on_cpu: bool) -> tuple[dict[str, Any], list[str]]:
    """Keyword arguments for ``XlaFullyShardedDataParallel`` and the names of the workarounds used."""
    kwargs: dict[str, Any] = {"reduce_scatter_bucket_size_mb": cfg.bucket_mb}
    applied = []
    if on_cpu and cfg.cpu_workarounds:
        for key, (value, why) in CPU_WORKAROUNDS.items():
            kwargs[key] = value
            applied.append(f"{key}={value} ({why})")
    kwargs.update(cfg.fsdp_options)
    return kwargs, applied


def options_taken(cls: Any, options: Mapping[str, Any]) -> None:
    """Refuse ``--fsdp-option`` names the wrapper class does not take, as bad input (exit 2)
    before anything is wrapped: its TypeError was reported as a failed run. A class that takes
    ``**kwargs`` passes them on to another one and is not second-guessed here."""
    import inspect

    taken = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        return
    unknown = sorted(set(options) - set(taken))
    if unknown:
        names = [n for n in taken if n not in ("self", "module")]
        names_said = ", ".join(names[:12]) + (", ..." if len(names) > 12 else "")
        raise InputError(
            f"--fsdp-option {unknown[0]}: {cls.__name__} takes no option {unknown[0]!r}; "
            f"it takes {names_said}"
        )


def wrap_v1(model: Any, cfg: RunConfig, device: Any, on_cpu: bool) -> tuple[Any, list[str]]:
    """Nested ``XlaFullyShardedDataParallel``: every encoder layer, then the whole model."""
    from torch_xla.distributed.fsdp import XlaFullyShardedDataParallel as FSDP

    kwargs, applied = fsdp_kwargs(cfg, on_cpu)
    options_taken(FSDP, cfg.fsdp_options)
    for k, layer in enumerate(model.layers):
        model.layers[k] = FSDP(layer.to(device), **kwargs)
    return FSDP(model.to(device), **kwargs), applied


def wrap_v2(model: Any, cfg: RunConfig, device: Any) -> tuple[Any, Any]:
    """SPMD ``SpmdFullyShardedDataParallel`` over a 1-D ``fsdp`` mesh, layers nested as in v1."""
    import numpy as np
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr
    from torch_xla.experimental.spmd_fully_sharded_data_parallel import (
        SpmdFullyShardedDataParallel as FSDPv2,
    )

    n = xr.global_runtime_device_count()
    mesh = xs.Mesh(np.arange(n), (n, 1), ("fsdp", "model"))
    options = dict(cfg.fsdp_options)
    options_taken(FSDPv2, options)
    for k, layer in enumerate(model.layers):
        model.layers[k] = FSDPv2(layer.to(device), mesh=mesh, **options)
    return FSDPv2(model.to(device), mesh=mesh, **options), mesh


__all__ = ["VOCAB", "CPU_WORKAROUNDS", "build_encoder", "fsdp_kwargs", "wrap_v1", "wrap_v2"]
