"""The runner's pure parts: debug-log parsing, fatal lines, config checks, explanations (no torch_xla)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from explorer.errors import InputError
from explorer.xla.analysis.explain import cached_sentence, new_graph_sentence, reasons
from explorer.xla.hlo import diff_modules, read_modules
from explorer.xla.runtime.config import RunConfig, parse_fsdp_options
from explorer.xla.traces.debuglog import parse_debug, slice_events
from explorer.xla.traces.failure import fatal_line, from_exit
from explorer.xla.traces.protocol import decode, encode

HLO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")


def _block(kind: str, cause: str, graph_hash: str, inputs: int) -> str:
    """One analysis block in torch_xla 2.9's layout (as PT_XLA_DEBUG_FILE receives it)."""
    p = f"{kind} Analysis: "
    head = "Compilation Cause" if kind == "Compilation" else "Execution Cause"
    lines = [
        "=" * 80,
        head,
        f"  {cause}",
        "Graph Info: ",
        f"  Graph Hash: {graph_hash}",
        f"  Number of Graph Inputs: {inputs}",
        "  Number of Graph Outputs: 7",
        "Python Frame Triggered Execution: ",
        "  sync (torch_xla/torch_xla.py:87)",
        "  step (train.py:12)",
        "-" * 80,
        "=" * 80,
    ]
    return "\n" + "\n".join(p + line for line in lines) + "\n\nComputation hash: 0f\n"


def test_debug_blocks_parse_into_events_in_file_order() -> None:
    text = (
        _block("Compilation", "user torch_xla.sync", "aa11", 3)
        + _block("Execution", "user torch_xla.sync", "aa11", 3)
        + _block(
            "Execution",
            "most likely user code trying to access tensor value before torch_xla.sync",
            "bb22",
            5,
        )
    )
    events = parse_debug(text)
    assert [(e.kind, e.graph_hash, e.inputs) for e in events] == [
        ("compile", "aa11", 3),
        ("execute", "aa11", 3),
        ("execute", "bb22", 5),
    ]
    assert (
        events[2].cause.startswith("most likely user code")
        and events[0].frames[-1] == "step (train.py:12)"
    )
    cut = len(text.encode()) - len(_block("Execution", "x", "bb22", 5).encode())
    setup, per_step = slice_events(text, [0, cut, len(text.encode())])
    assert setup == [] and [len(s) for s in per_step] == [2, 1]


def test_fatal_line_finds_the_glog_check_failure() -> None:
    stderr = (
        "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
        "F0000 00:00:1795241706.046859   20609 shape.h:400] Check failed: has_layout() (f32[128])\n"
        "*** Check failure stack trace: ***\n    @     0x7f299c924389  absl::LogMessage::SendToLog()\n"
    )
    assert fatal_line(stderr) == "Check failed: has_layout() (f32[128]) (shape.h:400)"
    f = from_exit(-6, stderr, 2)
    assert (f.kind, f.signal, f.step) == ("abort", "SIGABRT", 2) and f.message.endswith(
        "during step 2"
    )
    assert from_exit(-9, "", None).message.startswith("the XLA child process was killed by SIGKILL")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"scenario": "nope"}, "unknown scenario 'nope'"),
        ({"steps": -1}, "steps must be a positive integer"),
        ({"layers": 40}, "keep the model small"),
        ({"bucket_mb": -1.0}, "bucket_mb must be >= 0"),
        ({"fsdp": "v3"}, "choose v1"),
        ({"fsdp": "v2", "batch": 6}, "batch=6 must be divisible by virtual_devices=4"),
        ({"scenario": None, "step": "no_colon"}, "expected MODULE:FUNCTION"),
        ({"scenario": None, "step": "missing_file.py:step"}, "does not exist"),
    ],
)
def test_bad_configs_say_what_to_change(kwargs, words) -> None:
    with pytest.raises(InputError, match=words):
        RunConfig(**kwargs).resolved()


@pytest.mark.parametrize("device", ["CUDA", "cuda", "GPU"])
def test_xla_on_cuda_is_refused_before_a_child_starts(device, monkeypatch, tmp_path) -> None:
    """torch_xla 2.9 has no XLA:CUDA: asked by field or by environment, refused in one line."""
    from explorer.xla.runtime.launch import launch

    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    with pytest.raises(InputError, match="no XLA:CUDA plugin.*PJRT_DEVICE=TPU"):
        RunConfig(device=device).resolved()
    monkeypatch.setenv("PJRT_DEVICE", device)
    with pytest.raises(InputError, match="torch_xla 2.9 ships no XLA:CUDA"):
        RunConfig().resolved()
    with pytest.raises(InputError, match="no XLA:CUDA"):  # a config that skipped resolved()
        launch(RunConfig(steps=1), str(tmp_path))
    assert not os.listdir(tmp_path)  # refused before anything was written or started


def test_cpu_and_tpu_are_not_refused(monkeypatch) -> None:
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    assert RunConfig().resolved().pjrt_device == "CPU"
    assert RunConfig(device="tpu").resolved().pjrt_device == "TPU"


def test_xla_cpu_compiles_at_llvm_level_0_unless_the_user_chose_a_level(monkeypatch) -> None:
    from explorer.xla.runtime.launch import child_env

    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false --xla_dump_to=/elsewhere")
    flags = child_env(RunConfig().resolved(), "/out")["XLA_FLAGS"].split()
    assert "--xla_backend_optimization_level=0" in flags
    assert "--xla_cpu_enable_fast_math=false" in flags and "--xla_dump_to=/elsewhere" not in flags
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=3")
    flags = child_env(RunConfig().resolved(), "/out")["XLA_FLAGS"].split()
    assert [f for f in flags if "optimization_level" in f] == ["--xla_backend_optimization_level=3"]
    monkeypatch.delenv("XLA_FLAGS")
    tpu = child_env(RunConfig(device="tpu").resolved(), "/out")["XLA_FLAGS"]
    assert "optimization_level" not in tpu


def test_config_round_trips_and_presets_fill_defaults() -> None:
    cfg = RunConfig(
        scenario="bucketed-nested", fsdp_options={"flatten_parameters": False}
    ).resolved()
    assert cfg.bucket_mb == 1.0 and cfg.steps == 6
    assert RunConfig.from_json(cfg.to_json()) == cfg
    assert parse_fsdp_options(["flatten_parameters=false", "name=x"]) == {
        "flatten_parameters": False,
        "name": "x",
    }
    with pytest.raises(InputError):
        RunConfig.from_json(json.dumps({"scenaro": "steady"}))


def test_protocol_lines_survive_user_output_before_them() -> None:
    line = "partial user print" + encode("step", step=3, wall_ms=1.5).strip("\n")
    assert decode(line) == {"event": "step", "step": 3, "wall_ms": 1.5}
    assert decode("loss 0.25") is None


def test_explanations_from_real_torch_xla_hlo() -> None:
    """The fixtures are torch_xla 2.9 output (tests/data/hlo/make_fixtures.py)."""
    a, b = read_modules(os.path.join(HLO, "scalar_save.hlo.txt"))[:2]
    why = reasons(diff_modules(a, b))
    assert why[0] == f"the parameter count changed from {a.parameter_count} to {b.parameter_count}"
    mods = read_modules(os.path.join(HLO, "added_save.hlo.txt"))
    plain, logged = mods[1], mods[-1]
    d = diff_modules(plain, logged)
    sentence = new_graph_sentence("c" * 32, "d" * 32, 1, 0.9, d, "user torch_xla.sync")
    assert sentence.startswith("new graph: yes, because against graph dddddddd (step 1, 90% alike)")
    assert "added" in sentence and sentence.endswith("torch_xla: user torch_xla.sync")
    assert "only 10% alike" in new_graph_sentence("c" * 32, "d" * 32, -1, 0.1, d, "")
    assert (
        cached_sentence("e" * 32, 1)
        == "new graph: no, because graph eeeeeeee (compiled at step 1) ran from the compile cache"
    )


@pytest.mark.slow  # a fresh interpreter
def test_importing_the_xla_parts_imports_neither_torch_nor_torch_xla() -> None:
    code = (
        "import sys, explorer.xla.runtime, explorer.xla.cli.run, explorer.xla.analysis.assemble; "
        "print(sorted(m for m in ('torch', 'torch_xla') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
