"""Memory per rank over time (closed forms) and every weight gradient exactly once."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.gradients import gradient_counts
from explorer.pipeline.analysis.memory import memory_over_time
from explorer.pipeline.schedules.torch_csv import (
    order_from_schedule,
    schedule_from_order,
    write_torch_csv,
)
from explorer.pipeline.views.memory import memory_figure


@pytest.mark.parametrize(("kind", "p", "m"), [("1f1b", 4, 8), ("gpipe", 4, 8), ("1f1b", 3, 2)])
def test_activation_peaks_follow_the_closed_forms(kind: str, p: int, m: int) -> None:
    report = check(build(kind, p, m))
    memory = memory_over_time(report.schedule, report.timeline)
    want = [min(p - s, m) if kind == "1f1b" else m for s in range(p)]
    assert [max(r.activations) for r in memory] == want
    for r in memory:
        assert r.activations[-1] == 0 and r.receive_buffers[-1] == 0  # everything is freed
        assert r.peak == max(a + b for a, b in zip(r.activations, r.receive_buffers))
        assert 0 < r.peak_time <= report.timeline.makespan


def _broken_order():
    """Interleaved 1F1B with stage 2's backward of micro-batch 1 dropped and 0B3 run twice."""
    order = order_from_schedule(build("interleaved-1f1b", 2, 4, chunks=2))
    order[0] = [a for a in order[0] if str(a) != "2B1"] + [order[0][-1]]
    return order


def test_missing_and_doubled_gradients_are_named() -> None:
    assert gradient_counts(build("interleaved-1f1b", 2, 4, chunks=2)) == []
    wrong = {
        (g.stage, g.microbatch): g.count
        for g in gradient_counts(schedule_from_order(_broken_order()))
    }
    assert wrong == {(0, 3): 2, (2, 1): 0}


@pytest.mark.slow
def test_check_json_carries_memory_and_gradients(tmp_path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(write_torch_csv(_broken_order()))
    cmd = [sys.executable, "-m", "explorer", "check", "--from", str(path), "--json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and doc["ok"] is False and doc["gradients"]["ok"] is False
    said = [g["description"] for g in doc["gradients"]["not_exactly_once"]]
    assert (
        "stage 2 micro-batch 1: its weight gradient reaches the optimizer step never, not once"
        in said
    )
    peak = doc["memory"]["peak"]
    ranks = {r["rank"]: r for r in doc["memory"]["ranks"]}
    assert peak["value"] == max(r["peak"] for r in ranks.values()) == ranks[peak["rank"]]["peak"]


def test_memory_figure_marks_each_peak() -> None:
    report = check(build("1f1b", 3, 4))
    memory = memory_over_time(report.schedule, report.timeline)
    fig = memory_figure(memory).to_dict()
    peaks = [t for t in fig["data"] if t["name"] == "peak"]
    assert [(t["x"][0], t["y"][0]) for t in peaks] == [(m.peak_time, m.peak) for m in memory]
    assert len(fig["data"]) == 3 * len(memory)


def test_a_forward_only_schedule_holds_an_activation_until_it_is_sent():
    """``peak_activations`` of a forward-only schedule: freed at its send (the last stage at its
    forward), as the memory model frees it; it once said 8 of 8 for DeepSpeed's inference while
    the memory line said 2 for the same schedule."""
    from explorer.pipeline.analysis.timeline import peak_activations
    from explorer.pipeline.schedules.instructions import Instruction, Kind
    from explorer.pipeline.schedules.schedule import from_streams

    for p, m in [(1, 1), (2, 3), (4, 8), (8, 16)]:
        assert peak_activations(build("deepspeed-inference", p, m)) == [1] * p
    both_then_send = [  # stage 0 runs two forwards before it sends either output
        [[Instruction(0, Kind.FORWARD, 0, 0)], [Instruction(0, Kind.FORWARD, 1, 1)],
         [Instruction(0, Kind.SEND_ACTIVATION, 0, 0)], [Instruction(0, Kind.SEND_ACTIVATION, 1, 1)]],
        [[Instruction(1, Kind.RECV_ACTIVATION, 0, 0)], [Instruction(1, Kind.FORWARD, 0, 0)],
         [Instruction(1, Kind.RECV_ACTIVATION, 1, 1)], [Instruction(1, Kind.FORWARD, 1, 1)]],
    ]  # fmt: skip
    schedule = from_streams(both_then_send, name="forwards first", params={"p2p": "batched"})
    assert peak_activations(schedule) == [2, 1]
