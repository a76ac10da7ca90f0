"""Compile a model from a :class:`CompileConfig` and keep the model's own methods reachable.

In the seed thread, ``engine.get_model_tflops_per_batch_per_gpu()`` failed with compile on
and worked with compile off: the compiled wrapper hid the model's methods. Here calls go to
the compiled callable, while attribute reads and writes go to the user's model (writes too,
so that changing ``model.mode`` through the wrapper is what the compiled graph's guards see).
"""

from __future__ import annotations

from typing import Any, Optional

from explorer.compile.runtime.config import CompileConfig, resolve_backend
from explorer.compile.runtime.tracking import VariantTracker
from explorer.errors import InputError


class CompiledModel:
    """A compiled callable that forwards attribute access to the model it was built from."""

    __slots__ = ("_model", "_compiled", "_config")

    def __init__(self, model: Any, compiled: Any, config: CompileConfig) -> None:
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_compiled", compiled)
        object.__setattr__(self, "_config", config)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._compiled(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        model = object.__getattribute__(self, "_model")
        try:
            return getattr(model, name)
        except AttributeError:
            pass
        try:
            return getattr(object.__getattribute__(self, "_compiled"), name)
        except AttributeError:
            raise AttributeError(
                f"neither the compiled wrapper nor the model ({type(model).__name__}) has an "
                f"attribute {name!r}"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._model, name, value)

    @property
    def module(self) -> Any:
        """The user's model, uncompiled (DeepSpeed's name for it)."""
        return self._model

    def __repr__(self) -> str:
        return f"CompiledModel({type(self._model).__name__}, backend={self._config.backend_name!r})"


def _inductor_with_options(kwargs: dict[str, Any]) -> Any:
    """Inductor honouring ``mode``/``options``, as ``torch.compile(backend="inductor")`` builds it."""
    import torch

    wrapper = getattr(torch, "_TorchCompileInductorWrapper", None)
    if wrapper is None:  # pragma: no cover - present in every torch 2.x
        raise InputError(
            "this torch has no inductor wrapper: drop 'mode'/'options' from compile.kwargs"
        )
    return wrapper(kwargs.pop("mode", None), kwargs.pop("options", None), kwargs.get("dynamic"))


def compile_model(
    model: Any, config: CompileConfig, tracker: Optional[VariantTracker] = None
) -> CompiledModel:
    """Compile ``model`` as ``config`` says; with a ``tracker``, every graph call is counted.

    ``compiler_fn`` is called as is (the tracker cannot see inside it; the probe then reads
    variants from Dynamo's cache instead). ``enabled: false`` returns the model uncompiled,
    still wrapped, so the same loop runs with and without compile.
    """
    if not config.enabled:
        return CompiledModel(model, model, config)
    if config.compiler_fn is not None:
        return CompiledModel(model, config.compiler_fn(model), config)
    import torch

    kwargs = dict(config.kwargs)
    if config.backend == "inductor" and ("mode" in kwargs or "options" in kwargs):
        backend: Any = _inductor_with_options(kwargs)
    else:
        backend = resolve_backend(config.backend)
    if tracker is not None:
        backend = tracker.wrap(backend)
    return CompiledModel(model, torch.compile(model, backend=backend, **kwargs), config)


__all__ = ["CompiledModel", "compile_model"]
