"""Models for the real pipeline: the user contract, two built-in examples, and the stage split.

The contract (``--model MODULE:FUNCTION``): a function returning ``(layers, loss_fn, data_fn)``
where ``layers`` is an ``nn.Sequential`` or a list of modules, ``loss_fn(output, target)`` a
scalar loss and ``data_fn(index) -> (input, target)`` the ``index``-th micro-batch. The built-in
``mlp`` and ``transformer`` are ordinary functions of that shape (``explorer.pipeline.runtime.
models:mlp`` works as a ``--model`` too). Every rank calls the function after the same
``torch.manual_seed``, so all ranks and the reference hold bitwise identical weights; each rank
then keeps only its stages' layers (wasteful for big models, exact for tiny ones).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn

from explorer.errors import InputError
from explorer.loading import load_ref
from explorer.pipeline.runtime.model_shape import split
from explorer.pipeline.runtime.spec import ModelSpec

DataFn = Callable[[int], tuple[torch.Tensor, torch.Tensor]]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class PipelineModel:
    """A model cut into stages: ``stages[s]`` is the ``nn.Sequential`` stage ``s`` runs."""

    stages: list[nn.Sequential]
    loss_fn: LossFn
    data_fn: DataFn


def mlp(
    width: int = 32, layers: int = 8, microbatch_size: int = 4
) -> tuple[list[nn.Module], LossFn, DataFn]:
    """``layers`` Linear+Tanh blocks, regression to random targets (a built-in example)."""
    blocks: list[nn.Module] = [
        nn.Sequential(nn.Linear(width, width), nn.Tanh()) for _ in range(layers)
    ]

    def data(index: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(1_000_003 * (index + 1))
        return torch.randn(microbatch_size, width, generator=g), torch.randn(
            microbatch_size, width, generator=g
        )

    return blocks, nn.functional.mse_loss, data


class _Block(nn.Module):
    """Pre-norm transformer block: self-attention then an MLP, each with a residual."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class _Head(nn.Module):
    """Final norm and projection to the vocabulary, flattened for the cross-entropy."""

    def __init__(self, dim: int, vocab: int) -> None:
        super().__init__()
        self.norm, self.proj = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.norm(x)).flatten(0, 1)


def transformer(
    dim: int = 32,
    blocks: int = 6,
    heads: int = 2,
    vocab: int = 64,
    seq: int = 8,
    microbatch_size: int = 4,
    seqs: Sequence[int] = (),
) -> tuple[list[nn.Module], LossFn, DataFn]:
    """Embedding, ``blocks`` transformer blocks, head; next-token prediction (a built-in example).

    ``seqs`` gives micro-batch ``i`` the sequence length ``seqs[i % len(seqs)]`` (variable-length
    batches, unpadded) instead of ``seq`` for all: the shapes between stages then change from one
    micro-batch to the next, which an engine that sizes its receive buffers once must be told.
    """
    lengths = tuple(seqs) or (seq,)
    layers: list[nn.Module] = [
        nn.Embedding(vocab, dim),
        *(_Block(dim, heads) for _ in range(blocks)),
        _Head(dim, vocab),
    ]

    def data(index: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(2_000_003 * (index + 1))
        length = lengths[index % len(lengths)]
        tokens = torch.randint(vocab, (microbatch_size, length + 1), generator=g)
        return tokens[:, :-1], tokens[:, 1:].reshape(-1)

    return layers, nn.functional.cross_entropy, data


BUILTINS: dict[str, Callable[..., Any]] = {"mlp": mlp, "transformer": transformer}


def resolve(name: str) -> Callable[..., Any]:
    """The model function named ``mlp``, ``transformer`` or ``MODULE:FUNCTION``."""
    if name in BUILTINS:
        return BUILTINS[name]
    return load_ref(name, "--model", "my_models:build", expect="callable")


def build_model(spec: ModelSpec, num_stages: int, microbatch_size: int, seed: int) -> PipelineModel:
    """Call the model function under ``seed`` and split its layers into ``num_stages`` stages."""
    fn = resolve(spec.name)
    options = dict(spec.options)
    if "microbatch_size" in inspect.signature(fn).parameters:
        options.setdefault("microbatch_size", microbatch_size)
    torch.manual_seed(seed)
    try:
        made = fn(**options)
    except (Exception, SystemExit) as exc:  # the user's function: a message, never a silent exit
        raise InputError(
            f"--model {spec.name} raised {type(exc).__name__}: {str(exc)[:200]}"
        ) from None
    if not (isinstance(made, tuple) and len(made) == 3):
        raise InputError(
            f"--model {spec.name} returned {type(made).__name__}: it must return (layers, loss_fn, data_fn)"
        )
    layers, loss_fn, data_fn = made
    layers = list(layers.children()) if isinstance(layers, nn.Sequential) else list(layers)
    if not all(isinstance(layer, nn.Module) for layer in layers):
        raise InputError(
            f"--model {spec.name}: layers must be an nn.Sequential or a list of nn.Module"
        )
    return PipelineModel(
        [nn.Sequential(*part) for part in split(layers, num_stages, spec.cuts)], loss_fn, data_fn
    )


__all__ = [
    "DataFn",
    "LossFn",
    "PipelineModel",
    "mlp",
    "transformer",
    "BUILTINS",
    "resolve",
    "build_model",
    "split",
]
