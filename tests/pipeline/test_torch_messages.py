"""PyTorch's pipelining path records what travels: every exchange's tuple, checked like ours.

The unit tests describe real tensors and place real runtime orders; the slow one runs PyTorch's
``_PipelineScheduleRuntime`` on gloo (interleaved 1F1B on 2 ranks, where rank 0 sends both
activations and gradients to rank 1 untagged, so the two directions share one FIFO) and reads
its folder back with ``explorer read``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from built_once import built_once

from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.contract import message_steps
from explorer.pipeline.runtime.spec import RunSpec
from explorer.pipeline.runtime.torch_messages import message_fields
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.torch_csv import ORDER_FILE, runtime_schedule


def test_a_sent_tuple_is_described_element_by_element():
    ids = torch.zeros(4, 8, dtype=torch.int64)
    hidden = torch.ones(4, 8, 32, requires_grad=True)
    assert message_fields([ids, hidden], {}, (0, 3), receive=False) == {
        "p2p": ["int64[4,8]", "float32[4,8,32]*"]
    }


def test_a_receive_into_a_buffer_seen_before_names_the_receive_that_filled_it():
    origins: dict = {}
    a, b = torch.zeros(2, 3), torch.zeros(5, dtype=torch.bfloat16)
    assert message_fields([a], origins, (0, 4), receive=True) == {"p2p": ["float32[2,3]"]}
    again = message_fields([b, a], origins, (1, 9), receive=True)
    assert again == {"p2p": ["float32[2,3]", "bfloat16[5]"][::-1], "reused": [0, 4]}
    # b was new at (1, 9): a later receive into it alone points there
    assert message_fields([b], origins, (2, 9), receive=True)["reused"] == [1, 9]


def test_each_exchange_of_the_runtime_order_has_its_own_step():
    order = {
        "0": ["0UNSHARD", "0F0", "0SEND_F0", "0RECV_B0", "0B0"],
        "1": ["1UNSHARD", "1RECV_F0", "1F0", "1B0", "1SEND_B0"],
    }
    schedule = runtime_schedule(order)
    zero, one = message_steps(schedule, 0), message_steps(schedule, 1)
    assert {k: s for k, (s, _) in zero.items()} == {
        (0, Kind.SEND_ACTIVATION, 0): 1,
        (0, Kind.RECV_GRAD, 0): 2,
    }
    assert {k: s for k, (s, _) in one.items()} == {
        (1, Kind.RECV_ACTIVATION, 0): 0,
        (1, Kind.SEND_GRAD, 0): 3,
    }


@pytest.fixture(scope="module")
def torch_run(tmp_path_factory) -> Path:
    """One real run of PyTorch's engine: interleaved 1F1B, 2 ranks x 2 chunks, 2 iterations."""

    def launch():
        from explorer.pipeline.runtime.torch_engine import run_torch_engine

        folder = tmp_path_factory.mktemp("torch") / "run"
        spec = RunSpec.for_schedule(build("interleaved-1f1b", 2, 4, chunks=2), iterations=2)
        result = run_torch_engine(spec, folder)
        assert result.ok and result.to_dict()["contract"] == [], result.failure
        return folder

    return built_once(tmp_path_factory, "torch-engine-messages-run", launch)


def _messages(folder: Path) -> list[dict]:
    lines = [json.loads(x) for p in sorted(folder.glob("torch_rank*.jsonl")) for x in p.open()]
    return [r for r in lines if r["type"] == "message"]


@pytest.mark.slow
def test_every_exchange_of_pytorchs_runtime_carries_its_tuple(torch_run):
    order = json.loads((torch_run / ORDER_FILE).read_text())
    exchanges = Counter(a for acts in order.values() for a in acts if "SEND_" in a or "RECV_" in a)
    messages = _messages(torch_run)
    assert len(exchanges) == 2 * 3 * 4 * 2  # 3 stage boundaries x 4 micro-batches x 2 directions
    for it in (0, 1):
        mine = [m for m in messages if m["iteration"] == it]
        assert len(mine) == sum(exchanges.values())
        assert all(m["p2p"] == ["float32[4,32]" + ("*" if "A" in m["text"] else "")]
                   for m in mine), mine  # fmt: skip
    receives = [m for m in messages if m["text"][1] == "R"]
    # PyTorch allocates each micro-batch's buffers once: every second-iteration receive reuses one
    assert all("reused" not in m for m in receives if m["iteration"] == 0)
    assert all(m.get("reused", [None])[0] == 0 for m in receives if m["iteration"] == 1)


@pytest.mark.slow
def test_explorer_read_checks_the_runs_contract_and_catches_an_edited_receive(torch_run, tmp_path):
    doc = json.loads(_cli("read", str(torch_run), "--json").stdout)
    assert doc["ok"] and doc["contract"] == [] and doc["failure"] is None
    text = _cli("read", str(torch_run))
    assert text.returncode == 0 and "P2P contract: every message matched" in text.stdout
    # The same folder with one receive's buffer written as another shape: caught at its place.
    copy = tmp_path / "edited"
    subprocess.run(["cp", "-r", str(torch_run), str(copy)], check=True)
    path = copy / "torch_rank1.jsonl"
    lines = path.read_text().splitlines()
    at = next(i for i, x in enumerate(lines) if '"iteration": 1' in x and '"RecvActivation' in x)
    target = json.loads(lines[at])
    lines[at] = lines[at].replace("float32[4,32]", "float32[4,16]")
    path.write_text("\n".join(lines) + "\n")
    bad = _cli("read", str(copy), "--json")
    found = json.loads(bad.stdout)
    first = found["contract"][0]
    assert bad.returncode == 1 and found["failure"]["kind"] == "contract"
    assert (first["kind"], first["stage"], first["step"], first["iteration"]) == (
        "reuse",
        target["stage"],
        target["step"],
        1,
    )
    assert first["sent"] == ["float32[4,32]*"] and first["received"] == ["float32[4,16]*"]


@pytest.mark.slow
def test_explorer_check_on_the_torch_run_folder_is_clean(torch_run):
    doc = json.loads(_cli("check", str(torch_run), "--json").stdout)
    assert doc["source"] == "PyTorch's pipelining runtime" and doc["ok"]
    assert doc["exchanges"] == 48 * 2  # 24 messages, each a send and a receive, 2 iterations


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", *args], capture_output=True, text=True, timeout=300
    )
