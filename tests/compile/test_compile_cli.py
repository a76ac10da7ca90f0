"""``explorer compile-probe`` end to end in a subprocess: the JSON contract and the exit codes.

Every test runs the real ``torch.compile`` in a child, so the module is in the slow tier; the
bad inputs here are also rows of ``tests/cli_contract``'s table, asserted in-process there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow


def _cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", "compile-probe", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_json_document_for_the_period_three_scenario() -> None:
    out = _cli("--scenario", "cycling", "--iterations", "12", "--backend", "aot_eager", "--json")
    assert out.returncode == 1, out.stderr  # a finding: a period
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and doc["failure"] is None  # ok is the exit code's verdict
    assert doc["period"] == 3 and doc["cause"] == "cycling"
    assert set(doc["iterations"][0]) == {
        "iteration",
        "ms",
        "cpu_ms",
        "waited_ms",
        "compiled",
        "variant",
        "fallback",
        "synchronized",
    }
    # no CUDA initialised on a CPU run: nothing to wait for, and the document says so
    assert all(it["synchronized"] is False for it in doc["iterations"])
    # the process's CPU time and the wait for a core (Linux) are measured, and the wait is
    # inside the wall time it was read in
    assert all(0 <= it["waited_ms"] <= it["ms"] and it["cpu_ms"] >= 0 for it in doc["iterations"])
    assert [it["compiled"] for it in doc["iterations"]] == [True] * 3 + [False] * 9
    assert [c["compile_id"] for c in doc["compiles"]] == ["0/0", "0/1", "0/2"]
    assert doc["compiles"][0]["reason"] is None and "mode == 0" in doc["compiles"][1]["reason"]
    assert doc["graph_breaks"] == [] and "Cycling among 3 cached variants" in doc["diagnosis"]


def test_steady_scenario_exits_zero_and_prints_a_report() -> None:
    out = _cli("--scenario", "graph-break", "--iterations", "4", "--backend", "aot_eager")
    assert out.returncode == 0, out.stderr
    assert "graph break 0/0 at iteration 0" in out.stdout and "No period" in out.stdout


def test_bad_input_is_one_line_and_exit_two(tmp_path) -> None:
    bad_backend = _cli("--scenario", "cycling", "--backend", "my_pkg_missing.backend")
    assert bad_backend.returncode == 2
    assert (
        "cannot import module 'my_pkg_missing'" in bad_backend.stderr
        and "Traceback" not in bad_backend.stderr
    )
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"compile": {"enable": True}}))
    bad_key = _cli("--scenario", "cycling", "--config", str(cfg))
    assert bad_key.returncode == 2 and "unknown key(s) 'enable'" in bad_key.stderr
    assert _cli("--scenario", "cycling", "--iterations", "0").returncode == 2
    assert _cli("--scenario", "nope").returncode == 2


def test_user_step_from_a_file_and_a_failing_step(tmp_path) -> None:
    (tmp_path / "train_user.py").write_text(
        textwrap.dedent("""
        import torch
        model = torch.compile(torch.nn.Linear(8, 8), backend="aot_eager")
        def step(iteration):
            if iteration == 3:
                raise ValueError("bad batch")
            model(torch.ones(2, 8)).sum().backward()
    """)
    )
    out = _cli("--step", "train_user:step", "--iterations", "5", "--json", cwd=tmp_path)
    assert out.returncode == 1 and "bad batch" in out.stderr
    doc = json.loads(out.stdout)
    assert (
        doc["ok"] is False
        and len(doc["iterations"]) == 3
        and doc["compiles"][0]["compile_id"] == "0/0"
    )
