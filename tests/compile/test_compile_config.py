"""The DeepSpeed-style compile section, backend resolution, and attribute forwarding (real torch.compile)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from explorer.compile.runtime.config import (
    PRESETS_DEVICE,
    choose_backend,
    default_backend,
    parse_config,
    resolve_backend,
)
from explorer.errors import InputError


def test_accepts_whole_deepspeed_config_or_section() -> None:
    whole = parse_config(
        {"compile": {"enabled": True, "backend": "aot_eager", "kwargs": {"dynamic": False}}}
    )
    section = parse_config({"backend": "aot_eager", "kwargs": {"dynamic": False}})
    assert whole == section
    assert whole.kwargs == {"dynamic": False} and whole.backend_name == "aot_eager"


@pytest.mark.parametrize(
    "section, words",
    [
        ({"disable": False}, ["'disable'", "enabled"]),
        ({"enabled": "yes"}, ["enabled", "'yes'"]),
        ({"kwargs": {"backend": "x"}}, ["'backend'", "compile.backend"]),
        ({"kwargs": {"mode": "max-autotune", "options": {}}}, ["not both"]),
        ({"backend": ""}, ["dotted path"]),
    ],
)
def test_bad_sections_say_what_to_change(section: dict, words: list[str]) -> None:
    with pytest.raises(InputError) as err:
        parse_config({"compile": section})
    for word in words:
        assert word in str(err.value)


@pytest.mark.parametrize(
    "device, cxx, backend",
    [
        ("cpu", True, "inductor"),
        ("cpu", False, "aot_eager"),
        ("cuda", False, "inductor"),  # Triton kernels: no C++ compiler needed
        ("cuda:1", False, "inductor"),
        ("cuda", True, "inductor"),
    ],
)
def test_the_backend_follows_where_the_tensors_live(device, cxx, backend) -> None:
    assert choose_backend(device, cxx_found=cxx) == backend


def test_default_backend_follows_the_cxx_compiler_on_path(tmp_path, monkeypatch) -> None:
    """inductor where a C++ compiler is found (on PATH or named by CXX), aot_eager without one (on CPU)."""
    monkeypatch.delenv("CXX", raising=False)
    assert default_backend("cpu") == "inductor"  # the project's machines have g++
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no compiler on PATH
    assert default_backend("cpu") == "aot_eager"
    assert default_backend("cuda") == "inductor"  # inductor emits Triton there
    cxx = tmp_path / "my-cxx"
    cxx.write_text("#!/bin/sh\n")
    cxx.chmod(0o755)
    monkeypatch.setenv("CXX", "my-cxx")
    assert default_backend("cpu") == "inductor"


def test_a_visible_gpu_does_not_pick_inductor_for_the_cpu_presets(tmp_path, monkeypatch) -> None:
    """A GPU machine without a C++ compiler: the presets' tensors are on CPU, so aot_eager.

    Inductor there would compile C++ for the CPU tensors and fail for want of a compiler.
    """
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no compiler on PATH
    assert PRESETS_DEVICE == "cpu"
    assert parse_config({}).backend == "aot_eager"
    assert parse_config({}, device=PRESETS_DEVICE).backend == "aot_eager"
    assert parse_config({}, device="cuda").backend == "inductor"


def test_the_presets_tensors_are_where_presets_device_says() -> None:
    """The constant the presets' backend follows matches the tensors the preset models hold."""
    from explorer.compile.runtime.scenarios import build

    scenario = build("cycling", parse_config({"backend": "eager"}))
    devices = {p.device.type for p in scenario.model.parameters()}
    assert devices == {PRESETS_DEVICE}


def test_registered_and_unknown_backend_names() -> None:
    assert callable(resolve_backend("aot_eager"))
    with pytest.raises(InputError, match="unknown backend 'inductr'.*inductor"):
        resolve_backend("inductr")


@pytest.mark.slow  # real torch.compile
def test_dotted_path_backend_is_imported_and_used(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_backend_mod.py").write_text(
        textwrap.dedent("""
        CALLS = []
        def my_backend(gm, example_inputs):
            CALLS.append(len(gm.graph.nodes))
            return gm.forward
        NOT_CALLABLE = 3
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import torch

    from explorer.compile.runtime.wrapper import compile_model

    model = compile_model(
        torch.nn.Linear(4, 4), parse_config({"backend": "my_backend_mod.my_backend"})
    )
    torch._dynamo.reset()
    model(torch.ones(2, 4))
    assert sys.modules["my_backend_mod"].CALLS, "the dotted-path backend was never called by Dynamo"
    with pytest.raises(InputError, match="cannot import module 'no_such_mod'"):
        resolve_backend("no_such_mod.fn")
    with pytest.raises(InputError, match="has no attribute 'nope'"):
        resolve_backend("my_backend_mod.nope")
    with pytest.raises(InputError, match="not a callable"):
        resolve_backend("my_backend_mod.NOT_CALLABLE")


@pytest.mark.slow  # real torch.compile
def test_wrapper_reaches_user_methods_and_attributes() -> None:
    import torch

    from explorer.compile.runtime.models import ModeNet
    from explorer.compile.runtime.wrapper import compile_model

    net = ModeNet()
    model = compile_model(net, parse_config({"backend": "eager"}))
    assert (
        model.get_model_tflops_per_batch_per_gpu() == net.get_model_tflops_per_batch_per_gpu() > 0
    )
    model.mode = 2
    assert net.mode == 2 and model.module is net
    assert model(torch.ones(3, 256)).shape == (3, 256)
    with pytest.raises(AttributeError, match="ModeNet.*'no_such_thing'"):
        _ = model.no_such_thing


def test_compiler_fn_and_disabled_compile() -> None:
    import torch

    from explorer.compile.runtime.wrapper import compile_model

    seen = []

    def compiler_fn(model):
        seen.append(model)
        return torch.compile(model.forward, backend="eager")  # a plain function, not a module

    net = torch.nn.Linear(4, 4)
    model = compile_model(net, parse_config({"backend": "eager"}, compiler_fn=compiler_fn))
    assert seen == [net] and model.weight is net.weight
    assert compile_model(net, parse_config({"enabled": False}))._compiled is net
    with pytest.raises(InputError, match="compiler_fn must be callable"):
        parse_config({}, compiler_fn=3)
