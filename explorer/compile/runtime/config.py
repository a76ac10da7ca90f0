"""The ``compile`` section, in DeepSpeed's style, validated before anything compiles.

DeepSpeed's experimental ZeRO + torch.compile configuration (the seed thread) is
``{"compile": {"enabled": true, "backend": "inductor", "kwargs": {...}}}``, where ``backend``
is a registered name or the dotted path of a backend callable, and power users may hand a
``compiler_fn`` instead. The same shape is accepted here so a user's DeepSpeed config can be
pasted as is; every mistake (a typo in a key, a backend that cannot be imported) is an
:class:`~explorer.errors.InputError` that names what to change. torch is imported only when a
backend name has to be resolved.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

from explorer.errors import InputError
from explorer.loading import load_ref

#: Keys of the compile section.
SECTION_KEYS = ("enabled", "backend", "kwargs")
#: ``torch.compile`` keyword arguments that may appear under ``kwargs``.
COMPILE_KWARGS = ("fullgraph", "dynamic", "mode", "options", "disable")

Backend = Union[str, Callable[..., Any]]


@dataclass(frozen=True)
class CompileConfig:
    """A validated compile section; ``compiler_fn(model) -> compiled`` overrides the backend."""

    enabled: bool = True
    backend: Backend = "inductor"
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    compiler_fn: Optional[Callable[[Any], Any]] = None

    @property
    def backend_name(self) -> str:
        """A printable name: the registered name, the dotted path or the callable's qualified name."""
        if self.compiler_fn is not None:
            return f"compiler_fn:{_qualname(self.compiler_fn)}"
        if isinstance(self.backend, str):
            return self.backend
        return _qualname(self.backend)


def _qualname(fn: Any) -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return f"{module}.{name}" if module else name


#: Where every preset's tensors live: the presets are CPU training loops, GPU or not.
PRESETS_DEVICE = "cpu"
#: Device types whose tensors inductor compiles to Triton kernels (no C++ compiler needed).
TRITON_DEVICES = ("cuda",)


def choose_backend(device: str, cxx_found: bool) -> str:
    """The default backend for tensors on ``device`` (``cpu``, ``cuda``, ``cuda:1``, a ``torch.device``).

    It follows where the tensors live, not what hardware is visible: on a GPU machine a model
    on CPU still gets inductor's CPU code generation, which needs a C++ compiler
    (``cxx_found``), and ``aot_eager`` without one; only tensors on CUDA get inductor's
    Triton kernels, which need none.

    >>> choose_backend("cpu", cxx_found=False), choose_backend("cuda:0", cxx_found=False)
    ('aot_eager', 'inductor')
    """
    kind = str(device).split(":", 1)[0].strip().lower()
    if kind in TRITON_DEVICES or cxx_found:
        return "inductor"
    return "aot_eager"


def cxx_on_path() -> bool:
    """Whether a C++ compiler is found: ``$CXX``, or ``g++``, ``c++``, ``clang++`` on PATH."""
    compilers = [os.environ.get("CXX", ""), "g++", "c++", "clang++"]
    return any(c and shutil.which(c) for c in compilers)


def default_backend(device: str) -> str:
    """:func:`choose_backend` for ``device`` on this machine (no torch import: it is not asked)."""
    return choose_backend(device, cxx_on_path())


def parse_config(
    config: Optional[Mapping[str, Any]] = None,
    compiler_fn: Optional[Callable[[Any], Any]] = None,
    device: str = PRESETS_DEVICE,
) -> CompileConfig:
    """Validate a DeepSpeed-style config (whole, or just its ``compile`` section).

    ``device`` is where the compiled model's tensors live; it picks the backend when the
    section names none (:func:`default_backend`). The presets' tensors are on CPU.

    >>> parse_config({"compile": {"backend": "aot_eager", "kwargs": {"dynamic": False}}}).kwargs
    {'dynamic': False}
    """
    if config is None:
        config = {}
    if not isinstance(config, Mapping):
        raise InputError(f"the compile config must be a mapping, got {type(config).__name__}")
    section: Any = config.get("compile", config) if "compile" in config else config
    if not isinstance(section, Mapping):
        raise InputError(f"the 'compile' section must be a mapping, got {type(section).__name__}")
    unknown = sorted(set(section) - set(SECTION_KEYS))
    if unknown:
        hint = " (DeepSpeed uses 'enabled', not 'disable')" if "disable" in unknown else ""
        raise InputError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in the compile section{hint}: "
            f"allowed keys are {', '.join(SECTION_KEYS)}"
        )
    enabled = section.get("enabled", True)
    if not isinstance(enabled, bool):
        raise InputError(f"compile.enabled must be true or false, got {enabled!r}")
    kwargs = section.get("kwargs", {}) or {}
    if not isinstance(kwargs, Mapping):
        raise InputError(
            f"compile.kwargs must be a mapping of torch.compile arguments, got {kwargs!r}"
        )
    bad = sorted(set(kwargs) - set(COMPILE_KWARGS))
    if bad:
        raise InputError(
            f"compile.kwargs has {', '.join(map(repr, bad))}, which torch.compile does not take "
            f"here: allowed are {', '.join(COMPILE_KWARGS)} (the backend goes in compile.backend)"
        )
    if "mode" in kwargs and "options" in kwargs:
        raise InputError(
            "compile.kwargs may set 'mode' or 'options', not both (torch.compile refuses both)"
        )
    backend = section["backend"] if "backend" in section else default_backend(device)
    if not (isinstance(backend, str) and backend.strip()) and not callable(backend):
        raise InputError(
            f"compile.backend must be a registered name, a dotted path 'module.function' or a "
            f"callable, got {backend!r}"
        )
    if compiler_fn is not None and not callable(compiler_fn):
        raise InputError(
            f"compiler_fn must be callable (model -> compiled model), got {compiler_fn!r}"
        )
    return CompileConfig(
        enabled=enabled, backend=backend, kwargs=dict(kwargs), compiler_fn=compiler_fn
    )


def resolve_backend(backend: Backend) -> Callable[..., Any]:
    """The backend callable for a registered name, a dotted path, or a callable given as is.

    A name without a dot must be registered with Dynamo; a dotted path is imported, the way
    DeepSpeed resolves ``"backend": "my_backend.my_backend"``.
    """
    if callable(backend):
        return backend
    name = backend.strip()
    if "." not in name:
        import torch._dynamo

        known = set(torch._dynamo.list_backends(exclude_tags=()))
        if name not in known:
            usual = sorted(set(torch._dynamo.list_backends()) | {"aot_eager", "eager"})
            raise InputError(
                f"unknown backend {name!r}: registered backends include {', '.join(usual)}; "
                "or give the dotted path of a backend function, like 'my_pkg.my_backend'"
            )
        return torch._dynamo.lookup_backend(name)
    return load_ref(
        name, "backend", "my_pkg.my_backend", "a dotted path", dotted=True, expect="callable"
    )


__all__ = [
    "SECTION_KEYS",
    "COMPILE_KWARGS",
    "Backend",
    "CompileConfig",
    "PRESETS_DEVICE",
    "TRITON_DEVICES",
    "choose_backend",
    "cxx_on_path",
    "default_backend",
    "parse_config",
    "resolve_backend",
]
