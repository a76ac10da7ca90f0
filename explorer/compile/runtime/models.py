"""The scenario models and their one-iteration steps (torch imported at module level: load lazily).

Kept apart from :mod:`scenarios` so that listing the presets (the CLI's ``--help``, the
widget's dropdown) never imports torch. Each ``build_<name>(config, tracker)`` returns the
model and ``step(iteration)``; every step is an ordinary training iteration a user could
have written, which is the point: the probe needs nothing special from the loop.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch
from torch import nn

from explorer.compile.runtime.config import CompileConfig
from explorer.compile.runtime.tracking import VariantTracker
from explorer.compile.runtime.wrapper import CompiledModel, compile_model

Built = tuple[Any, Callable[[int], None]]
DIM = 256


class ModeNet(nn.Module):
    """A block whose Python attribute ``mode`` picks the code path: a guard per value."""

    def __init__(self, heavy_modes: tuple[int, ...] = (2,)) -> None:
        super().__init__()
        self.inp = nn.Linear(DIM, DIM)
        self.out = nn.Linear(DIM, DIM)
        self.mode = 0
        self.heavy_modes = heavy_modes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.inp(x))
        if self.mode in self.heavy_modes:
            for _ in range(12):
                y = torch.tanh(y @ self.out.weight)
        return self.out(y) * (1.0 + 0.1 * self.mode)

    def get_model_tflops_per_batch_per_gpu(self) -> float:
        """A user method the compiled wrapper must still reach (the seed's complaint)."""
        return 2.0 * sum(p.numel() for p in self.parameters()) * 64 / 1e12


def _train_step(
    model: Any, batch: Callable[[int], torch.Tensor], before: Callable[[int], None]
) -> Callable[[int], None]:
    params = (
        list(model.module.parameters())
        if isinstance(model, CompiledModel)
        else list(model.parameters())
    )
    opt = torch.optim.SGD(params, lr=1e-3)

    def step(iteration: int) -> None:
        before(iteration)
        loss = model(batch(iteration)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


def _fixed(rows: int = 64) -> Callable[[int], torch.Tensor]:
    x = torch.randn(rows, DIM, generator=torch.Generator().manual_seed(0))
    return lambda _i: x


def build_cycling(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    net = ModeNet(heavy_modes=(2,))
    model = compile_model(net, config, tracker)

    def set_mode(i: int) -> None:
        model.mode = i % 3

    return model, _train_step(model, _fixed(128), set_mode)


def build_limit(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    net = ModeNet(heavy_modes=(4, 5))
    model = compile_model(net, config, tracker)

    def set_mode(i: int) -> None:
        model.mode = i % 6

    return model, _train_step(model, _fixed(), set_mode)


class SeqNet(nn.Module):
    """Per-token MLP over a (batch, sequence, features) input."""

    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(DIM, DIM), nn.GELU(), nn.Linear(DIM, DIM))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mlp(x).mean(dim=1)


def build_shapes(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    model = compile_model(SeqNet(), config, tracker)
    gen = torch.Generator().manual_seed(0)
    cache: dict[int, torch.Tensor] = {}

    def batch(i: int) -> torch.Tensor:
        length = 8 + 4 * (i // 3)
        if length not in cache:
            cache[length] = torch.randn(4, length, DIM, generator=gen)
        return cache[length]

    return model, _train_step(model, batch, lambda _i: None)


NORMS: list[float] = []


@torch.compiler.disable
def log_norm(h: torch.Tensor) -> None:
    """Logging that reads a value back to Python: kept out of the graph, hence a graph break."""
    NORMS.append(float(h.detach().norm()))
    del NORMS[:-100]


class LoggingNet(nn.Module):
    """Logs an activation norm mid-forward, as training code often does."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(DIM, DIM)
        self.b = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        log_norm(h)
        return self.b(h)


def build_graph_break(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    model = compile_model(LoggingNet(), config, tracker)
    return model, _train_step(model, _fixed(), lambda _i: None)


class ShardedNet(nn.Module):
    """Three layers whose weights live in a shard store and are gathered only around their use.

    The gather/release hooks stand for ZeRO-3's all-gather and free; like DeepSpeed's, they
    are wrapped in ``torch.compiler.disable`` because collectives do not trace.
    """

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(3))
        self.store = {id(p): p.detach().clone() for p in self.parameters()}
        self.pending: list[nn.Parameter] = []
        for layer in self.layers:
            layer.register_forward_pre_hook(self._gather)
            layer.register_forward_hook(self._mark_release)
        self.release()

    @torch.compiler.disable
    def _gather(self, module: nn.Module, _inputs: Any) -> None:
        for p in module.parameters(recurse=False):
            p.data = self.store[id(p)]

    @torch.compiler.disable
    def _mark_release(self, module: nn.Module, _inputs: Any, _output: Any) -> None:
        self.pending.extend(module.parameters(recurse=False))

    def release(self) -> None:
        """Free gathered weights after backward, as ZeRO-3 does once gradients are reduced."""
        for p in self.pending or list(self.parameters()):
            p.data = torch.empty(0)
        self.pending.clear()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def build_zero3_hooks(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    net = ShardedNet()
    model = compile_model(net, config, tracker)
    x = _fixed()(0)

    def step(_iteration: int) -> None:
        loss = model(x).square().mean()
        loss.backward()
        with torch.no_grad():
            for p in net.parameters():
                if p.grad is not None and p.numel():
                    net.store[id(p)].sub_(1e-3 * p.grad)
                p.grad = None
        net.release()

    return model, step


#: The accumulation scenario's weight averages (see :func:`build_accumulation`).
EMA_DECAYS = (0.01, 0.001, 0.0001)


def build_accumulation(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    # Wide and fed a tiny batch, so the optimizer step (memory-bound, every 3rd iteration)
    # costs clearly more than a forward and backward: the signal must stand out of the noise
    # of a machine shared with other jobs, since time is its only evidence.
    net = nn.Sequential(nn.Linear(DIM, 48 * DIM), nn.GELU(), nn.Linear(48 * DIM, DIM))
    model = compile_model(net, config, tracker)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=False, amsgrad=True)
    # Averages of the weights at three decays, as model averaging keeps them: more memory-bound
    # work in the step's iteration, so its period stands out of the noise of a shared machine.
    emas = [(decay, [p.detach().clone() for p in net.parameters()]) for decay in EMA_DECAYS]
    x = _fixed(2)(0)
    accumulate = 3

    def step(iteration: int) -> None:
        (model(x).square().mean() / accumulate).backward()
        if iteration % accumulate == accumulate - 1:
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                for decay, ema in emas:
                    for avg, p in zip(ema, net.parameters()):
                        avg.lerp_(p, decay)

    return model, step


def build_deepspeed(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    from explorer.compile.runtime.deepspeed_engine import build_engine_step

    return build_engine_step(ModeNet(heavy_modes=(2,)), config, tracker)


def build_deepspeed_zero3(config: CompileConfig, tracker: Optional[VariantTracker]) -> Built:
    from explorer.compile.runtime.deepspeed_engine import build_engine_step

    return build_engine_step(ModeNet(heavy_modes=(2,)), config, tracker, stage=3)


__all__ = [
    "Built",
    "DIM",
    "ModeNet",
    "build_cycling",
    "build_limit",
    "SeqNet",
    "build_shapes",
    "NORMS",
    "log_norm",
    "LoggingNet",
    "build_graph_break",
    "ShardedNet",
    "build_zero3_hooks",
    "build_accumulation",
    "build_deepspeed",
    "build_deepspeed_zero3",
]
