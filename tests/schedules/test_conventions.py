"""The P2P conventions (``--receives``, ``--parity``, ``--batching``) move exchanges and nothing else.

Once they rebuilt the schedule from PyTorch's order with one buffer per micro-batch and batched
P2P: the seed's schedule, 11 hazards under blocking P2P, came out "valid" with ``--receives
deferred``; and Megatron's even/odd rule moved a receive ahead of the very send its message
waits for, so GPipe at 3 stages x 1 micro-batch was called a deadlock. Here every convention
keeps each instruction's buffer and the schedule's P2P model, ``minimal`` buffers are sized for
the moved order, and a receive keeps its place behind a send it depends on.
"""

from __future__ import annotations

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.conventions import under_conventions
from explorer.pipeline.analysis.sizes import Asking, check_sizes, parse_sizes
from explorer.pipeline.schedules.instructions import Instruction, Kind
from explorer.pipeline.schedules.schedule import from_streams
from explorer.pipeline.schedules.torch_actions import parse_action
from explorer.pipeline.schedules.torch_p2p import parity_order

CONVENTIONS = [
    {"receives": "deferred"},
    {"batching": "adjacent"},
    {"batching": "per-peer"},
    {"parity": True},
]


@pytest.mark.parametrize("conventions", CONVENTIONS, ids=lambda c: ",".join(map(str, c.values())))
def test_a_schedule_keeps_its_buffers_and_its_p2p_model(conventions):
    seed = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    moved = under_conventions(seed, **conventions)
    assert moved.buffers == seed.buffers == (4, 3, 2, 2)
    assert moved.params["p2p"] == "blocking"
    # DeepSpeed's one received gradient per stage, not a PyTorch runtime order's one per micro-batch
    assert moved.params.get("grad_receive") == seed.params.get("grad_receive")
    assert moved.params["kind"] == "deepspeed-train" and moved.params["conventions"]
    assert not check(moved).ok  # the seed's buffers and blocking sends, still judged as they are
    one = build("gpipe", 4, 8, buffers=1)  # one buffer per stage: every receive overwrites
    moved = under_conventions(one, **conventions)
    assert moved.buffers == (1, 1, 1, 1) and check(moved).findings.hazards


def test_every_instruction_keeps_its_buffer_wherever_it_moves():
    seed = build("deepspeed-train", 4, 8, buffers="fixed", order="fixed")
    moved = under_conventions(seed, receives="deferred", batching="adjacent")
    assert moved is not seed and moved.name.endswith("deferred receives+adjacent batches")

    def placed(s):
        return sorted(
            zip(s.stage.tolist(), s.kind.tolist(), s.microbatch.tolist(), s.buffer.tolist())
        )

    assert placed(moved) == placed(seed)


def test_deferred_receives_under_deepspeeds_blocking_sends_deadlock():
    """Both neighbours send first once receives wait for their consumer: a real cycle, which the
    old rewrite hid by switching the schedule to batched P2P."""
    report = check(under_conventions(build("deepspeed-train", 4, 8), receives="deferred"))
    assert report.model == "blocking" and report.findings.deadlock is not None


def test_minimal_buffers_are_sized_for_the_moved_order():
    moved = under_conventions(build("1f1b", 4, 8), parity=True)
    report = check(moved)
    assert report.ok, report.findings.all()[:1]
    assert list(report.buffers.allocated) == list(report.buffers.needed)


@pytest.mark.parametrize(
    ("kind", "options", "sizes"),
    [
        ("gpipe", {}, "1-6:1-12"),
        ("1f1b", {}, "1-6:1-12"),
        ("zb-h1", {}, "1-6:1-12"),
        ("interleaved-1f1b", {"chunks": 2}, "2-6:2-12"),
        ("interleaved-1f1b", {"chunks": 3}, "2-4:2-12"),
        ("dualpipev", {}, "1-6:2-12"),
        ("deepspeed-inference", {}, "1-6:1-12"),
    ],
)
@pytest.mark.parametrize("conventions", CONVENTIONS, ids=lambda c: ",".join(map(str, c.values())))
def test_a_correct_schedule_stays_clean_under_every_convention(kind, options, sizes, conventions):
    stages, mbs = parse_sizes(sizes)
    sweep = check_sizes(
        lambda p, m: under_conventions(build(kind, p, m, **options), **conventions),
        stages,
        mbs,
        asking=Asking("batched" if kind != "deepspeed-inference" else "blocking", "lazy"),
    )
    worst = sweep.smallest_failing
    assert worst is None, f"{worst.stages}x{worst.microbatches}: {worst.first_words}"
    assert sweep.checked


def test_parity_keeps_a_receive_behind_the_send_its_message_waits_for():
    """GPipe at 3 x 1: rank 1 sends activation 0 on and then receives gradient 0, which stage 2
    can only send after it. The odd rank's receive-first rule leaves that pair alone."""
    order = {
        0: [parse_action(a) for a in ("0F0", "0SEND_F0", "0RECV_B0", "0B0")],
        1: [
            parse_action(a) for a in ("1RECV_F0", "1F0", "1SEND_F0", "1RECV_B0", "1B0", "1SEND_B0")
        ],
        2: [parse_action(a) for a in ("2RECV_F0", "2F0", "2B0", "2SEND_B0")],
    }
    assert [str(a) for a in parity_order(order)[1]] == [
        "1RECV_F0",
        "1F0",
        "1SEND_F0",
        "1RECV_B0",
        "1B0",
        "1SEND_B0",
    ]
    # independent exchanges of one run are still reordered: receive first on an odd rank
    steady = {
        0: [parse_action(a) for a in ("0F1", "0SEND_F1", "0F2", "0SEND_F2", "0RECV_B0", "0B0")],
        1: [parse_action(a) for a in ("1RECV_F1", "1B0", "1SEND_B0", "1RECV_F2", "1F2")],
    }
    assert [str(a) for a in parity_order(steady)[1]] == [
        "1RECV_F1",
        "1B0",
        "1RECV_F2",
        "1SEND_B0",
        "1F2",
    ]


def test_parity_with_deepspeeds_buffers_brings_the_seeds_hazard_back():
    """Odd ranks receive first: the next activation lands in the buffer whose gradient is not
    sent yet, the seed's bug, under DeepSpeed's fixed buffer count (no +1)."""
    stages, mbs = parse_sizes("2-6:1-12")
    sweep = check_sizes(
        lambda p, m: under_conventions(build("deepspeed-train", p, m), parity=True),
        stages,
        mbs,
        asking=Asking("blocking", "lazy"),
    )
    worst = sweep.smallest_failing
    assert worst is not None and (worst.stages, worst.microbatches) == (3, 3)
    assert worst.hazards > 0 and "holds micro-batch" in worst.first_words


def test_a_schedule_the_rewrite_cannot_carry_is_refused():
    """A load on a middle stage: PyTorch's lowering loads only on the first and last stage."""
    streams = [
        [[Instruction(0, Kind.LOAD, 0, 0), Instruction(0, Kind.FORWARD, 0, 0)],
         [Instruction(0, Kind.SEND_ACTIVATION, 0, 0)]],
        [[Instruction(1, Kind.RECV_ACTIVATION, 0, 0)],
         [Instruction(1, Kind.LOAD, 0, 0), Instruction(1, Kind.FORWARD, 0, 0)],
         [Instruction(1, Kind.SEND_ACTIVATION, 0, 0)]],
        [[Instruction(2, Kind.RECV_ACTIVATION, 0, 0)],
         [Instruction(2, Kind.LOAD, 0, 0), Instruction(2, Kind.FORWARD, 0, 0)]],
    ]  # fmt: skip
    schedule = from_streams(streams, name="loads everywhere", params={"p2p": "batched"})
    with pytest.raises(InputError, match="cannot carry all of its instructions"):
        under_conventions(schedule, batching="adjacent")
