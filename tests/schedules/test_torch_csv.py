"""PyTorch's schedule CSV in and out, ``check --from FILE.csv``, and pytorch #172668's cycle named."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.torch_words import cycle_words
from explorer.pipeline.schedules.adapters import from_torch_pipelining
from explorer.pipeline.schedules.torch_actions import ActionType, TorchAction
from explorer.pipeline.schedules.torch_csv import (
    order_from_schedule,
    read_torch_csv,
    schedule_from_order,
    write_torch_csv,
)

#: The two ranks' tails quoted in pytorch #172668 (pp=2, 4 stages), stuck under blocking sends.
ISSUE_RANK0 = ["0F0", "0SEND_F0", "0F1", "0SEND_F1", "2RECV_F0", "2F0"]
ISSUE_RANK1 = ["1RECV_F0", "1F0", "1SEND_F0", "1RECV_F1", "1F1"]


def _consumer_placed_interleaved():
    """Interleaved 1F1B, 2 ranks x 2 chunks, 4 micro-batches: each receive right before its consumer."""
    return order_from_schedule(build("interleaved-1f1b", 2, 4, chunks=2), comms=True)


@pytest.mark.parametrize(("kind", "chunks"), [("1f1b", 1), ("gpipe", 1), ("interleaved-1f1b", 2)])
@pytest.mark.parametrize("comms", [False, True])
def test_round_trip(kind: str, chunks: int, comms: bool) -> None:
    order = order_from_schedule(build(kind, 3 if chunks == 1 else 2, 4, chunks=chunks), comms=comms)
    text = write_torch_csv(order)
    assert read_torch_csv(text) == order
    assert write_torch_csv(read_torch_csv(text)) == text


def test_idle_cells_and_errors() -> None:
    assert read_torch_csv("0F0,,0B0\n,1F0,1B0\n")[0][1] is None
    with pytest.raises(
        InputError, match=r"row 2 \(rank 1\), column 2: cannot read pipelining action '1X0'"
    ):
        read_torch_csv("0F0,0B0\n1F0,1X0\n")
    with pytest.raises(InputError, match="holds no action"):
        read_torch_csv(",\n")


def test_orders_are_held_to_the_option_limits_before_anything_is_sized() -> None:
    f0, send, recv = ActionType.FORWARD, ActionType.SEND_F, ActionType.RECV_F
    # a compute+comms order built in code, past the micro-batch limit on an exchange only
    order = {
        0: [TorchAction(0, f0, 0), TorchAction(0, send, 10**7)],
        1: [TorchAction(1, recv, 10**7), TorchAction(1, f0, 0)],
    }
    with pytest.raises(InputError, match="limit of 65,536 micro-batches"):
        schedule_from_order(order)
    with pytest.raises(InputError, match="limit of 1,048,576"):
        schedule_from_order(read_torch_csv("0F65535\n1023F0\n"))  # each number fits, not both
    with pytest.raises(InputError, match="limit of 1,048,576"):
        from_torch_pipelining({0: ["0F0"]}, num_stages=1024, num_microbatches=2048)


def test_stages_that_never_compute_are_counted_not_listed() -> None:
    with pytest.raises(InputError) as refused:
        schedule_from_order(read_torch_csv("0F0\n1023F0\n"))
    message = str(refused.value)
    assert "1,022 of the 1,024 stages never compute" in message
    assert "stages 1, 2, 3, 4 and 1,018 more" in message and len(message) < 200


def test_pytorch_172668_reordering_and_its_cycle() -> None:
    order = _consumer_placed_interleaved()
    assert [str(a) for a in order[0][: len(ISSUE_RANK0)]] == ISSUE_RANK0
    assert [str(a) for a in order[1][: len(ISSUE_RANK1)]] == ISSUE_RANK1
    schedule = schedule_from_order(read_torch_csv(write_torch_csv(order)))
    blocking = check(schedule, model="blocking")
    assert not blocking.ok
    assert cycle_words(schedule, blocking.findings.deadlock, blocking.matching.partner) == (
        "cycle under blocking P2P: rank 0 is stuck in 0SEND_F1 until rank 1 posts 1RECV_F1, "
        "which rank 1 only reaches after 1SEND_F0; rank 1 is stuck in 1SEND_F0 until rank 0 "
        "posts 2RECV_F0, which rank 0 only reaches after 0SEND_F1"
    )
    assert check(schedule, model="batched").ok  # sends that never wait: the same order runs


@pytest.mark.slow
def test_check_from_csv_cli(tmp_path) -> None:
    path = tmp_path / "edited.csv"
    path.write_text(write_torch_csv(_consumer_placed_interleaved()))

    def run(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "explorer", "check", "--from", str(path), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    done = run("--model", "blocking", "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["deadlock"]["model"] == "blocking"
    assert "rank 0 is stuck in 0SEND_F1" in doc["deadlock_in_pytorch_words"]
    assert run("--model", "batched").returncode == 0
    path.write_text("0F0,0Z1\n")
    done = run()
    assert done.returncode == 2 and "column 2" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_pytorchs_own_loader_and_dumper_agree() -> None:
    """PyTorch's ``_load_csv`` reads our CSV to the same order; its ``_dump_csv`` reads back through ours."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    from explorer.pipeline.runtime.pipelining_orders import StageShape

    order = order_from_schedule(build("interleaved-1f1b", 2, 4, chunks=2))
    ours = write_torch_csv(order)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        src, only, comms = (Path(tmp) / n for n in ("ours.csv", "only.csv", "comms.csv"))
        src.write_text(ours)
        runtime = _PipelineScheduleRuntime([StageShape(0, 4, 2, 0), StageShape(2, 4, 2, 0)], 4)
        runtime._load_csv(str(src))
        assert {r: [str(a) for a in acts] for r, acts in runtime.pipeline_order.items()} == {
            r: [str(a) for a in acts] for r, acts in order.items()
        }
        runtime._dump_csv(str(only), format="compute_only")
        assert only.read_text().replace("\r\n", "\n") == ours
        runtime._dump_csv(str(comms), format="compute_comms")
        theirs = read_torch_csv(comms.read_text())
    assert {str(a) for acts in theirs.values() for a in acts if a} >= {
        "2RECV_F0",
        "0SEND_F0",
        "0UNSHARD",
    }
    schedule = schedule_from_order(theirs)
    # PyTorch posts each receive early (right after its partner's step): no cycle under either model.
    assert check(schedule, model="batched").ok and check(schedule, model="blocking").ok


def test_a_csv_saved_with_a_byte_order_mark_reads_as_without(tmp_path) -> None:
    """A spreadsheet's "CSV UTF-8" export starts with U+FEFF: it was read into the first cell,
    "cannot read pipelining action '\\ufeff0F0'"."""
    from explorer.pipeline.schedules.torch_csv import read_schedule_csv

    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    text = write_torch_csv(_consumer_placed_interleaved())
    plain.write_text(text, encoding="utf-8")
    marked.write_text(text, encoding="utf-8-sig")
    assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
    a, b = read_schedule_csv(str(plain)), read_schedule_csv(str(marked))
    assert [list(a.stream(r)) for r in range(a.num_ranks)] == [
        list(b.stream(r)) for r in range(b.num_ranks)
    ]
