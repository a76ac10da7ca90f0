"""``explorer run``: the JSON contract, exit codes, and one line without a traceback on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = REPO, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", "run", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
    )


@pytest.mark.slow
def test_json_has_exactly_the_issue_keys_and_the_trace_is_written(cli_1f1b_run):
    # run --kind 1f1b --stages 2 --microbatches 4 --trace T --out F --json (tests/shared_runs.py)
    out = cli_1f1b_run.done
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert list(data) == [
        "ok",
        "losses",
        "bitwise_equal_to_reference",
        "failure",
        "instructions",
        "contract",
    ]
    assert (
        data["ok"] is True
        and data["bitwise_equal_to_reference"] is True
        and data["failure"] is None
    )
    assert len(data["losses"]) == 4 and len(data["instructions"]) > 0
    assert {"rank", "stage", "step", "instruction", "microbatch", "buffer", "start", "end"} <= set(
        data["instructions"][0]
    )
    assert len(json.loads(cli_1f1b_run.trace.read_text())["traceEvents"]) > len(
        data["instructions"]
    )


@pytest.mark.slow
def test_seed_schedule_exits_1_with_the_failure(tmp_path):
    out = _cli(
        "--kind",
        "deepspeed-train",
        "--stages",
        "4",
        "--microbatches",
        "8",
        "--buffers",
        "fixed",
        "--order",
        "legacy",
        "--out",
        str(tmp_path),
        "--json",
    )
    assert out.returncode == 1
    failure = json.loads(out.stdout)["failure"]
    assert (failure["rank"], failure["stage"], failure["step"], failure["instruction"]) == (
        2,
        2,
        6,
        "SendGrad(buffer_id=0)",
    )
    collected = _cli("--collect", str(tmp_path), "--json")  # the folder alone tells the same story
    assert collected.returncode == 1 and json.loads(collected.stdout)["failure"] == failure


@pytest.mark.parametrize(
    "args, words",
    [
        (["--kind", "1f1b", "--stages", "12", "--microbatches", "4"], "8 layers for 12 stages"),
        pytest.param(
            [
                "--kind",
                "1f1b",
                "--stages",
                "2",
                "--microbatches",
                "4",
                "--model",
                "no_such_module:fn",
            ],
            "cannot import",
            marks=pytest.mark.slow,  # --model imports torch and the user's module
        ),
        (["--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--cuts", "x"], "--cuts"),
        (["--stages", "2", "--microbatches", "4"], "--kind"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(explorer_cli, args, words):
    out = explorer_cli("run", *args, cwd=REPO)
    assert out.returncode == 2 and words in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_nccl_without_gpus_says_what_to_use(explorer_cli):
    import torch

    if torch.cuda.device_count() >= 2:
        pytest.skip("this machine has GPUs for NCCL")
    out = explorer_cli(
        "run",
        "--kind",
        "1f1b",
        "--stages",
        "2",
        "--microbatches",
        "4",
        "--backend",
        "nccl",
        cwd=REPO,
    )
    assert out.returncode == 2 and "--backend gloo" in out.stderr


@pytest.mark.slow
def test_user_model_through_module_function(tmp_path):
    (tmp_path / "my_model.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def build():\n"
        "    layers = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 1))\n"
        "    def data(i):\n"
        "        g = torch.Generator().manual_seed(i)\n"
        "        return torch.randn(3, 6, generator=g), torch.randn(3, 1, generator=g)\n"
        "    return layers, nn.functional.mse_loss, data\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = _cli(
        "--kind",
        "deepspeed-train",
        "--stages",
        "2",
        "--microbatches",
        "4",
        "--model",
        "my_model:build",
        "--cuts",
        "4",
        "--json",
        cwd=tmp_path,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["bitwise_equal_to_reference"] is True


@pytest.mark.slow
def test_torchrun_runs_the_same_command_as_its_ranks(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            str(port),
            "-m",
            "explorer.cli",
            "run",
            "--kind",
            "deepspeed-train",
            "--stages",
            "2",
            "--microbatches",
            "4",
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=240,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["ok"] and data["bitwise_equal_to_reference"] is True
    assert sorted(p.name for p in tmp_path.glob("rank*.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]


@pytest.mark.slow
def test_a_model_whose_losses_are_nan_is_said_and_its_folder_reads_back(tmp_path):
    """JSON has no NaN: the losses are written as null, counted, and said in words; the run's
    own folder reads back (it did not: a strict reader refused the NaN the writer put there)."""
    (tmp_path / "diverging.py").write_text(
        "import torch\nfrom torch import nn\n"
        "def build():\n"
        "    def data(i):\n"
        "        return torch.full((2, 8), float('inf')), torch.zeros(2, 8)\n"
        "    return [nn.Linear(8, 8) for _ in range(4)], nn.functional.mse_loss, data\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    out = _cli(
        "--kind", "1f1b", "--stages", "2", "--microbatches", "2", "--model", "diverging:build",
        "--out", str(tmp_path / "run"), cwd=tmp_path, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "warning: 2 loss(es) not finite" in out.stdout
    result = json.loads((tmp_path / "run" / "result.json").read_text())  # strict JSON now
    assert result["losses"] == [None, None] and result["nonfinite_losses"] == 2
    read = subprocess.run(
        [sys.executable, "-m", "explorer", "read", str(tmp_path / "run"), "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout)["losses"] == [None, None]
