"""P2P conventions as options of the deadlock search, on PyTorch's own lowered order and the threads' cases."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.communicators import first_contacts, lazy_communicator_deadlock
from explorer.pipeline.analysis.torch_words import cycle_words
from explorer.pipeline.schedules.torch_csv import (
    order_from_schedule,
    read_torch_csv,
    schedule_from_order,
    write_torch_csv,
)
from explorer.pipeline.schedules.torch_p2p import (
    batches,
    communicator_deadlock,
    defer_receives,
    parity_order,
    peer_function,
)

FIRST_CYCLE = (  # pytorch #172668, first report: receives deferred to their consumers
    "cycle under blocking P2P: rank 0 is stuck in 0SEND_F1 until rank 1 posts 1RECV_F1, which rank 1 "
    "only reaches after 1SEND_F0; rank 1 is stuck in 1SEND_F0 until rank 0 posts 2RECV_F0, which "
    "rank 0 only reaches after 0SEND_F1"
)
SECOND_CYCLE = (  # the same thread after swapping RECV and SEND on odd ranks (Megatron's parity)
    "cycle under blocking P2P: rank 0 is stuck in 0SEND_F2 until rank 1 posts 1RECV_F2, which rank 1 "
    "only reaches after 3SEND_B0; rank 1 is stuck in 3SEND_B0 until rank 0 posts 2RECV_B0, which "
    "rank 0 only reaches after 0SEND_F2"
)


def _verdicts(order, batching: str = "none") -> dict:
    schedule = schedule_from_order(order, batching=batching)
    out = {}
    for model in ("blocking", "batched"):
        r = check(schedule, model=model)
        out[model] = (
            "ok" if r.ok else cycle_words(schedule, r.findings.deadlock, r.matching.partner)
        )
    return out


@pytest.fixture(scope="module")
def pytorch_lowered(tmp_path_factory):
    """PyTorch's own compute+comms order for interleaved 1F1B, 2 ranks x 2 chunks, 4 micro-batches (its _dump_csv)."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    from explorer.pipeline.runtime.pipelining_orders import StageShape

    folder = tmp_path_factory.mktemp("csv")
    src, out = folder / "compute.csv", folder / "comms.csv"
    src.write_text(write_torch_csv(order_from_schedule(build("interleaved-1f1b", 2, 4, chunks=2))))
    runtime = _PipelineScheduleRuntime([StageShape(0, 4, 2, 0), StageShape(2, 4, 2, 0)], 4)
    runtime._load_csv(str(src))
    runtime._dump_csv(str(out), format="compute_comms")
    return out


@pytest.mark.slow
def test_receive_placement_and_megatron_parity_reproduce_the_thread(pytorch_lowered):
    theirs = read_torch_csv(pytorch_lowered.read_text())
    assert _verdicts(theirs) == {"blocking": "ok", "batched": "ok"}
    assert _verdicts(defer_receives(theirs)) == {"blocking": FIRST_CYCLE, "batched": "ok"}
    assert _verdicts(parity_order(defer_receives(theirs))) == {
        "blocking": SECOND_CYCLE,
        "batched": "ok",
    }
    cmd = [
        sys.executable,
        "-m",
        "explorer",
        "check",
        "--from",
        str(pytorch_lowered),
        "--model",
        "blocking",
    ]
    done = subprocess.run(
        cmd + ["--receives", "deferred", "--parity"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1 and SECOND_CYCLE in done.stdout
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0


def test_batching_groups_adjacent_exchanges():
    order = read_torch_csv("0F0,0SEND_F0,0RECV_B0,0B0\n1RECV_F0,1F0,1B0,1SEND_B0\n")
    peer = peer_function({0: 0, 1: 1})
    assert [len(s) for s in batches(order, peer, "none")[0]] == [1, 1, 1, 1]
    assert [len(s) for s in batches(order, peer, "adjacent")[0]] == [1, 2, 1]
    schedule = schedule_from_order(order, batching="adjacent")
    step = schedule.stream(0)[1]
    assert [str(i) for i in step] == ["0SA0b0", "0RG0b0"]
    three = {1: [a for a in read_torch_csv("1SEND_F0,1RECV_F1,1SEND_B0\n")[0]]}
    per_peer = batches(three, peer_function({0: 0, 1: 1, 2: 2}), "per-peer")[1]
    assert [[str(a) for a in s] for s in per_peer] == [["1RECV_F1", "1SEND_B0"], ["1SEND_F0"]]


def test_lazy_communicators():
    assert communicator_deadlock({0: [1, 2], 1: [2, 0], 2: [0, 1]}).startswith(
        "lazily created communicators deadlock: rank 0 creates its communicator with rank 1 first"
    )
    interleaved = build("interleaved-1f1b", 3, 6, chunks=2)
    assert first_contacts(interleaved) == {0: [1, 2], 1: [0, 2], 2: [1, 0]}
    assert lazy_communicator_deadlock(interleaved) is None
    # Rank 0 posts its receive from rank 2 (stage 3's input) before anything else: its first peer is 2.
    order = order_from_schedule(interleaved, comms=True)
    early = next(a for a in order[0] if str(a) == "3RECV_F0")
    order[0] = [early] + [a for a in order[0] if a is not early]
    prefetching = schedule_from_order(order)
    assert first_contacts(prefetching)[0] == [2, 1]
    found = lazy_communicator_deadlock(prefetching)
    assert "rank 0 creates its communicator with rank 2 first" in found.describe()
    # Pinned where rank 0 waits: its first exchange with rank 2, the early receive of stage 3.
    assert (found.rank, found.stage, found.step) == (0, 3, int(prefetching.step[0]))
    assert check(prefetching, communicators="lazy").findings.communicators == found
    assert check(prefetching).findings.communicators is None  # eager: not asked


@pytest.mark.slow
def test_check_options_on_the_cli(tmp_path):
    order = order_from_schedule(build("interleaved-1f1b", 3, 6, chunks=2), comms=True)
    early = next(a for a in order[0] if str(a) == "3RECV_F0")
    order[0] = [early] + [a for a in order[0] if a is not early]
    path = tmp_path / "prefetch.csv"
    path.write_text(write_torch_csv(order))
    cmd = [sys.executable, "-m", "explorer", "check", "--from", str(path), "--json"]
    eager = json.loads(subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout)
    assert "lazy_communicators" not in eager  # asked for only with --communicators lazy
    lazy = subprocess.run(
        cmd + ["--communicators", "lazy"], capture_output=True, text=True, timeout=120
    )
    assert lazy.returncode == 1
    assert "rank 2 first" in json.loads(lazy.stdout)["lazy_communicators"]["deadlock"]
