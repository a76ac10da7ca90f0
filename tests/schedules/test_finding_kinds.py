"""Every finding kind the check reports, with a schedule that must trigger it and one that must not.

Each case is the smallest schedule that shows the fault, beside the same schedule without it, so
a finding kind that stops firing, or that starts firing on a correct schedule, fails here by name.
The verdict (``Report.ok``) is asked too: a finding that does not count is no finding.
"""

from __future__ import annotations

from typing import Callable

import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.check import Report
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.schedule import Schedule, from_streams
from explorer.pipeline.schedules.torch_csv import order_from_schedule, schedule_from_order

from .net import drop_last_weight_pass, run_last_weight_pass_twice


def _edited(schedule: Schedule, edit: Callable[[dict], None], comms: bool = False) -> Schedule:
    order = order_from_schedule(schedule, comms=comms)
    edit(order)
    return schedule_from_order(order)


def _drop(rank: int, text: str) -> Callable[[dict], None]:
    def edit(order: dict) -> None:
        order[rank] = [a for a in order[rank] if str(a) != text]

    return edit


def _first(rank: int, text: str) -> Callable[[dict], None]:
    """``text`` moved to the front of ``rank``'s order (a receive posted before anything else)."""

    def edit(order: dict) -> None:
        early = next(a for a in order[rank] if str(a) == text)
        order[rank] = [early] + [a for a in order[rank] if a is not early]

    return edit


def _late_backward() -> Schedule:
    """DeepSpeed's TrainSchedule at 2 x 2 with stage 0's last backward moved after its optimizer step."""
    streams = build("deepspeed-train", 2, 2, buffers="legacy", order="fixed").streams()
    rank0 = streams[0]
    t, ins = max(
        ((t, i) for t, step in enumerate(rank0) for i in step if i.kind is Kind.BACKWARD),
        key=lambda found: found[0],
    )
    rank0[t] = [i for i in rank0[t] if i is not ins]
    rank0.append([ins])
    return from_streams(streams, name="late backward", params={"p2p": "blocking"})


def _seed(p: int, m: int) -> Schedule:
    return build("deepspeed-train", p, m, buffers="fixed", order="legacy")


# (finding kind, how it is read from a report, the schedule with the fault, the schedule without,
# how each is asked)
CASES: list[tuple[str, Callable[[Report], object], Callable[[], Report], Callable[[], Report]]] = [
    (
        "hazard",
        lambda r: r.findings.hazards,
        lambda: check(_seed(3, 3)),
        lambda: check(build("deepspeed-train", 3, 3, buffers="fixed", order="fixed")),
    ),
    (
        "unmatched",
        lambda r: r.findings.unmatched,
        lambda: check(_edited(build("gpipe", 2, 2), _drop(1, "1RECV_F1"), comms=True)),
        lambda: check(_edited(build("gpipe", 2, 2), lambda o: None, comms=True)),
    ),
    (
        "mismatch",
        lambda r: r.findings.mismatched,
        lambda: check(_torch_1f1b(2, 2)),
        lambda: check(build("1f1b", 2, 2)),
    ),
    (
        "deadlock under blocking P2P",
        lambda r: r.findings.deadlock,
        lambda: check(build("1f1b", 2, 2), model="blocking"),
        lambda: check(build("1f1b", 2, 2), model="batched"),
    ),
    (
        "deadlock under batched P2P",
        lambda r: r.findings.deadlock,
        lambda: check(_prefetching(), model="batched"),
        lambda: check(build("interleaved-1f1b", 3, 6, chunks=2), model="batched"),
    ),
    (
        "lazily created communicators",
        lambda r: r.findings.communicators,
        lambda: check(_prefetching(), communicators="lazy"),
        lambda: check(build("interleaved-1f1b", 3, 6, chunks=2), communicators="lazy"),
    ),
    (
        "a weight gradient never reaches the optimizer step",
        lambda r: [g for g in r.findings.gradients if g.count == 0],
        lambda: check(_edited(build("zb-h1", 2, 2), drop_last_weight_pass)),
        lambda: check(_edited(build("zb-h1", 2, 2), lambda o: None)),
    ),
    (
        "a weight gradient counted twice",
        lambda r: [g for g in r.findings.gradients if g.count == 2],
        lambda: check(_edited(build("zb-h1", 2, 2), run_last_weight_pass_twice)),
        lambda: check(_edited(build("zb-h1", 2, 2), lambda o: None)),
    ),
    (
        "a weight gradient produced after the optimizer step",
        lambda r: [g for g in r.findings.gradients if g.late],
        lambda: check(_late_backward()),
        lambda: check(build("deepspeed-train", 2, 2, buffers="legacy", order="fixed")),
    ),
]


def _torch_1f1b(p: int, m: int) -> Schedule:
    """PyTorch 2.9's own Schedule1F1B order, whose later ranks number micro-batches one ahead."""
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order
    from explorer.pipeline.schedules.adapters import from_torch_pipelining

    return from_torch_pipelining(pipeline_order("Schedule1F1B", p, m), num_microbatches=m)


def _prefetching() -> Schedule:
    """Interleaved 1F1B, 3 ranks x 2 chunks: rank 0 posts stage 3's first receive before anything."""
    return _edited(build("interleaved-1f1b", 3, 6, chunks=2), _first(0, "3RECV_F0"), comms=True)


@pytest.mark.parametrize(("name", "read", "faulty", "sound"), CASES, ids=[c[0] for c in CASES])
def test_each_finding_kind_fires_on_its_fault_and_only_there(name, read, faulty, sound) -> None:
    bad, good = faulty(), sound()
    assert read(bad), f"{name}: not found in the schedule built to show it"
    assert not bad.ok and bad.findings.all(), f"{name}: found, but the verdict ignores it"
    assert not read(good), f"{name}: found in the schedule without the fault"
    assert good.ok, (
        f"{name}: the schedule without the fault is called wrong: {good.findings.all()[:1]}"
    )


def test_forward_only_schedules_have_no_gradient_to_count() -> None:
    """DeepSpeed's InferenceSchedule, and the same order through PyTorch's CSV, train nothing:
    the gradient invariant does not apply, and the schedule is valid."""
    inference = build("deepspeed-inference", 4, 8)
    for schedule in (inference, _edited(inference, lambda o: None, comms=True)):
        report = check(schedule)
        assert report.ok and report.findings.gradients == ()
        doc = report.to_dict()["gradients"]
        assert doc["applies"] is False and doc["checked"] == 0 and doc["ok"] is True
    train = check(build("1f1b", 4, 8)).to_dict()["gradients"]
    assert train["applies"] is True and train["checked"] == 32
