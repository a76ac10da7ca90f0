"""``explorer xla-run``: the JSON contract, exit codes, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from explorer.xla.runtime import STEP_KEYS

pytestmark = pytest.mark.slow


def _cli(
    *args: str, cwd: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", "xla-run", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=None if env is None else {**os.environ, **env},
        timeout=400,
    )


def test_shape_change_json_and_exit_code(tmp_path) -> None:
    out = tmp_path / "run"
    proc = _cli(
        "--scenario", "shape-change", "--steps", "4", "--layers", "1", "--out", str(out), "--json"
    )
    assert proc.returncode == 1, proc.stderr  # a new graph after warm-up is a finding
    doc = json.loads(proc.stdout)
    assert (
        list(doc) == ["ok", "device", "steps", "graphs", "failure"]
        and doc["ok"] is False  # ok is the exit code's verdict: the late graph is a finding
        and doc["failure"] is None
    )
    assert [tuple(s) for s in doc["steps"]] == [STEP_KEYS] * 4
    step3 = doc["steps"][3]
    assert step3["compiled"] and "changed shape" in step3["cause"] and "s64[4,12]" in step3["cause"]
    assert step3["diff_summary"] and doc["steps"][2]["compiled"] is False
    assert json.loads((out / "run.json").read_text()) == doc
    assert any(name.endswith("before_optimizations.txt") for name in os.listdir(out / "hlo_dump"))


@pytest.mark.parametrize(
    "args, words",
    [
        (["--scenario", "steady", "--layers", "0"], "layers must be a positive integer"),
        (["--step", "nocolon"], "expected MODULE:FUNCTION"),
        (["--scenario", "steady", "--fsdp-option", "novalue"], "expected KEY=VALUE"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, words) -> None:
    proc = _cli(*args)
    assert proc.returncode == 2
    assert (
        words in proc.stderr
        and len(proc.stderr.strip().splitlines()) == 1
        and "Traceback" not in proc.stderr
    )


def test_pjrt_device_cuda_is_refused_in_one_line() -> None:
    """torch_xla 2.9 ships no XLA:CUDA plugin (pytorch/xla #9597): say so, and what to use."""
    proc = _cli("--scenario", "steady", "--steps", "1", env={"PJRT_DEVICE": "CUDA"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "torch_xla 2.9 ships no XLA:CUDA plugin" in lines[0]
    assert "PJRT_DEVICE=TPU" in lines[0] and "XLA:CPU" in lines[0]
    assert proc.stdout == ""


def test_missing_user_function_is_bad_input_from_the_child(tmp_path) -> None:
    (tmp_path / "mytrain.py").write_text("def other(i):\n    pass\n")
    proc = _cli("--step", "mytrain:step", "--steps", "2", cwd=str(tmp_path))
    assert proc.returncode == 2, proc.stderr
    assert "has no attribute 'step'" in proc.stderr and "Traceback" not in proc.stderr
