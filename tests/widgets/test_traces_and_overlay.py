"""Measured traces: a real PyTorch profiler export read back, and drawn over the simulation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from figdict import figure_dict

from explorer.errors import InputError
from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.measured import measured_vs_simulated
from explorer.pipeline.schedules import Kind
from explorer.pipeline.traces import MeasuredTrace, read_chrome_trace
from explorer.pipeline.views.overlay import EMPTY_NOTE, NOTE_WIDTH, overlay_figure


def test_reads_pp_actions_from_a_real_profiler_export(tmp_path):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile, record_function

    actions = ["1RECV_F0", "1F0", "1SEND_F0", "1UNSHARD", "1B0", "1SEND_B0"]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for name in actions:
            with record_function(f"PP:{name}"):
                torch.ones(64, 64).sum()
    path = tmp_path / "rank1.json"
    prof.export_chrome_trace(str(path))
    trace = read_chrome_trace(path, rank=1)
    kinds = [Kind(int(k)).code for k in trace.kind[np.argsort(trace.start)]]
    assert kinds == ["RA", "F", "SA", "B", "SG"]  # UNSHARD has no counterpart and is skipped
    assert set(trace.stage.tolist()) == {1} and set(trace.rank.tolist()) == {1}
    assert (trace.end >= trace.start).all() and trace.unit == "s"


def test_rank_from_distributed_info_and_explorer_form():
    doc = {
        "distributedInfo": {"rank": 3},
        "traceEvents": [
            {"ph": "X", "name": "PP:3RA2b0", "ts": 10.0, "dur": 5.0, "pid": 9},
            {"ph": "X", "name": "aten::mm", "ts": 11.0, "dur": 1.0},
            {"ph": "i", "name": "PP:3F2", "ts": 12.0},
        ],
    }
    trace = read_chrome_trace(doc)
    assert trace.to_records() == [
        {
            "rank": 3,
            "stage": 3,
            "step": -1,
            "kind": "RA",
            "microbatch": 2,
            "start": pytest.approx(10e-6),
            "end": pytest.approx(15e-6),
        }
    ]


def test_bad_inputs_say_what_to_do(tmp_path):
    with pytest.raises(InputError, match="export_chrome_trace"):
        read_chrome_trace(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not JSON"):
        read_chrome_trace(tmp_path / "bad.json")
    with pytest.raises(InputError, match="PP:2F0"):
        read_chrome_trace([{"ph": "X", "name": "PP:??", "ts": 0, "dur": 1}])
    with pytest.raises(InputError, match="needs"):
        MeasuredTrace.from_records([{"rank": 0}])


def _measured_from_simulation(
    report, factor: float, slow_kind: Kind, extra: float
) -> MeasuredTrace:
    """A trace whose times are the simulation's, scaled, with one kind slower: known answers."""
    s, tl = report.schedule, report.timeline
    recs = []
    for i in range(len(s)):
        if tl.end[i] <= tl.start[i]:
            continue
        end = tl.end[i] * factor + (extra if s.kind[i] == slow_kind else 0.0)
        recs.append(
            {
                "rank": int(s.rank[i]),
                "stage": int(s.stage[i]),
                "kind": int(s.kind[i]),
                "microbatch": int(s.microbatch[i]),
                "start": 5.0 + tl.start[i] * factor,
                "end": 5.0 + end,
            }
        )
    return MeasuredTrace.from_records(recs, source="scaled simulation")


def test_overlay_recosts_the_simulation_from_the_trace_and_aligns_start():
    report = check(build("1f1b", 4, 8))
    trace = _measured_from_simulation(report, factor=0.01, slow_kind=Kind.BACKWARD, extra=0.005)
    d = figure_dict(overlay_figure(measured_vs_simulated(report, trace)))
    assert "re-costed from this measurement" in d["layout"]["title"]["text"]
    assert d["layout"]["xaxis"]["title"]["text"] == "time (s)"
    fwd = next(t for t in d["data"] if t["name"] == "measured F")
    assert min(fwd["base"]) == pytest.approx(0.0)  # aligned to the first measured event
    assert all(abs(y - round(y) - 0.2) < 1e-9 for y in fwd["y"])  # the measured lane of each rank
    measured = next(t for t in d["data"] if t["name"] == "mean, measured")
    simulated = next(t for t in d["data"] if t["name"] == "mean, simulated")
    sim = dict(zip(simulated["x"], simulated["y"]))
    meas = dict(zip(measured["x"], measured["y"]))
    # Re-costed per kind: forwards 10 ms, backwards 25 ms (20 + the 5 ms the trace added), in seconds.
    assert sim["F ForwardPass"] == pytest.approx(0.01) and meas["F ForwardPass"] == pytest.approx(
        0.01
    )
    assert sim["B BackwardPass"] == pytest.approx(0.025) and meas[
        "B BackwardPass"
    ] == pytest.approx(0.025)
    kinds = [
        t["name"]
        for t in d["data"]
        if t.get("legendgroup") in ("F", "B") and t.get("showlegend") is not False
    ]
    assert "F ForwardPass" in kinds and "B BackwardPass" in kinds  # the legend names the kinds
    shares = [t for t in d["data"] if t.get("xaxis") == "x2"]
    assert [t["name"] for t in shares] == ["compute", "transfer", "waiting", "other", "idle"]
    total = np.sum([t["x"] for t in shares], axis=0)
    assert total == pytest.approx(
        np.ones(len(total)), abs=1e-6
    )  # each rank's iteration, all accounted for


def test_the_overlay_draws_what_was_analysed_and_analyses_nothing_itself():
    """The figure takes the analysed record: drawing it (again, zoomed) runs no check, no
    re-costing and no simulation, whichever way a view might import them."""
    import sys

    report = check(build("1f1b", 4, 8))
    analysed = measured_vs_simulated(
        report, _measured_from_simulation(report, factor=0.01, slow_kind=Kind.BACKWARD, extra=0.0)
    )
    analyses = {
        "check",
        "recosted",
        "trace_costs",
        "simulate",
        "breakdown",
        "wait_split",
        "pair_by_key",
        "measured_vs_simulated",
    }
    ran: set[str] = set()

    def watch(frame, event, arg):
        path = frame.f_code.co_filename.replace("\\", "/")
        if event == "call" and "/pipeline/analysis/" in path and frame.f_code.co_name in analyses:
            ran.add(f"{path.rsplit('/', 1)[-1]}:{frame.f_code.co_name}")

    sys.setprofile(watch)
    try:
        whole = figure_dict(overlay_figure(analysed))
        zoomed = figure_dict(overlay_figure(analysed, x_range=(0.0, 0.05)))
    finally:
        sys.setprofile(None)
    assert not ran, f"the view ran analyses: {sorted(ran)}"
    assert "re-costed from this measurement" in whole["layout"]["title"]["text"]
    assert zoomed["layout"]["xaxis"]["range"] == [0.0, 0.05]
    notes = [a["text"] for a in whole["layout"]["annotations"]]
    assert analysed.words and analysed.words in " ".join(n.replace("<br>", " ") for n in notes)
    lines = [line for n in notes for line in n.split("<br>")]
    assert max(map(len, lines)) <= NOTE_WIDTH, lines  # no note runs under the legend


def test_receives_are_split_into_waiting_and_transfer():
    report = check(build("deepspeed-train", 2, 2))
    s, tl = report.schedule, report.timeline
    recs = []
    for i in range(len(s)):
        if tl.end[i] > tl.start[i] or s.kind[i] in (Kind.RECV_ACTIVATION, Kind.SEND_ACTIVATION):
            start, end = tl.start[i] * 0.01, tl.end[i] * 0.01
            if (
                s.kind[i] == Kind.RECV_ACTIVATION
            ):  # the receive is posted 30 ms before its send starts
                end = max(end, start + 0.001)
                start = start - 0.03
            recs.append(
                {
                    "rank": int(s.rank[i]),
                    "stage": int(s.stage[i]),
                    "kind": int(s.kind[i]),
                    "microbatch": int(s.microbatch[i]),
                    "start": start,
                    "end": end,
                }
            )
    trace = MeasuredTrace.from_records(recs, source="waits")
    d = figure_dict(overlay_figure(measured_vs_simulated(report, trace)))
    waiting = next(t for t in d["data"] if t["name"] == "measured waiting")
    assert (
        min(waiting["x"]) >= 0.0299
    )  # each receive's wait for its send, drawn apart from its transfer
    share = next(t for t in d["data"] if t["name"] == "waiting" and t.get("xaxis") == "x2")
    assert max(share["x"]) > 0.1 and "waiting" in " ".join(
        a["text"] for a in d["layout"]["annotations"]
    )


def test_without_a_trace_the_overlay_is_the_empty_hook():
    d = figure_dict(overlay_figure(measured_vs_simulated(check(build("gpipe", 2, 4)))))
    assert EMPTY_NOTE in d["layout"]["title"]["text"]
    # nothing is written over the lanes: centred on them, the note hid the simulated bars
    lo, hi = d["layout"]["yaxis"]["domain"]
    assert not [a["text"] for a in d["layout"]["annotations"] if lo <= a["y"] <= hi]
    assert not [t for t in d["data"] if t["name"].startswith("measured ")]
    assert json.dumps(d)  # plain JSON all the way down


def test_a_rank_that_stopped_early_is_not_said_to_sit_in_the_bubble():
    """A failed job: rank 0 was killed after its first instructions. Its time after them is
    'stopped', not the schedule's idle, in the shares and in the sentence."""
    from dataclasses import replace

    report = check(build("1f1b", 4, 8))
    trace = _measured_from_simulation(report, factor=0.01, slow_kind=Kind.BACKWARD, extra=0.0)
    keep = (trace.rank != 0) | (trace.start <= np.sort(trace.start[trace.rank == 0])[3])
    cut = MeasuredTrace(
        *(getattr(trace, f)[keep] for f in ("rank", "stage", "step", "kind", "microbatch")),
        start=trace.start[keep],
        end=trace.end[keep],
        source=trace.source,
    )
    plain = figure_dict(overlay_figure(measured_vs_simulated(report, cut)))
    said = figure_dict(overlay_figure(measured_vs_simulated(report, replace(cut, stopped=(0,)))))

    def shares(d):
        return {t["name"]: t for t in d["data"] if t.get("xaxis") == "x2"}

    assert "stopped" not in shares(plain)  # only failed runs carry the category
    stopped = shares(said)["stopped"]
    row = stopped["y"].index("rank 0 measured")
    assert stopped["x"][row] > 0.5 and shares(said)["idle"]["x"][row] < 0.1
    assert all(x == 0 for i, x in enumerate(stopped["x"]) if i != row)
    total = np.sum([t["x"] for t in shares(said).values()], axis=0)
    assert total == pytest.approx(np.ones(len(total)), abs=1e-6)
    words = json.dumps(said["layout"])
    assert "; rank 0 stopped early (failed or ended)" in words
