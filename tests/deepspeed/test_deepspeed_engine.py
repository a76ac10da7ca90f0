"""``explorer run --engine deepspeed``: DeepSpeed 0.19.8's own PipelineEngine, 4 ranks on gloo.

Every run here is the real engine in 4 real processes (about 15-35 s each on 2 cores). The
seed's class is built from DeepSpeed 0.8.1's real ``schedule.py`` (see ``conftest.py``). The
``--engine all`` run is made once and read by two tests: its DeepSpeed part is today's stock
schedule on DeepSpeed's engine, the very run the bitwise comparison with 0.8.1's class needs.
"""

from __future__ import annotations

import json
import time

import pytest
from built_once import built_once
from deepspeed_runs import OLD_CLASS, SEED_CLASS, explorer_cli

pytestmark = pytest.mark.slow

SIZES = ["--stages", "4", "--microbatches", "8"]
KEYS = {"rank", "stage", "step", "iteration", "instruction", "start", "end"}


def _run(args, env, tmp_path, name):
    out = tmp_path / name
    done = explorer_cli(
        ["run", "--engine", "deepspeed", *SIZES, "--json", "--out", str(out), *args], env, tmp_path
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def three_engines(ds081_env, tmp_path_factory):
    """``run --engine all`` of today's DeepSpeed schedule: (process, run folder, page)."""

    def run():
        where = tmp_path_factory.mktemp("engines")
        done = explorer_cli(
            ["run", "--engine", "all", "--kind", "deepspeed-train", *SIZES, "--json", "--out",
             str(where / "all"), "--html", str(where / "all.html")],
            ds081_env,
            where,
            timeout=600,
        )  # fmt: skip
        return done, where / "all", where / "all.html"

    return built_once(tmp_path_factory, "deepspeed-engine-all-4x8", run)


def test_the_seeds_class_fails_inside_deepspeeds_engine_at_stage_2_step_6(ds081_env, tmp_path):
    code, doc = _run(["--from", SEED_CLASS], ds081_env, tmp_path, "seed")
    assert code == 1 and doc["ok"] is False and doc["engine"] == "deepspeed"
    assert doc["deepspeed_version"] == "0.19.8"
    f = doc["failure"]
    assert (f["rank"], f["stage"], f["step"], f["instruction"]) == (
        2,
        2,
        6,
        "SendGrad(buffer_id=0)",
    )
    assert f["exception_type"] == "AssertionError"
    assert "inputs.grad is not None" in f["message"]
    innermost = f["traceback_tail"].splitlines()[-1]
    assert "_exec_send_grads" in innermost and "deepspeed/runtime/pipe" in innermost
    assert "in _exec_schedule" in f["traceback_tail"]  # the engine's frames around it, too
    # The other ranks' errors come after, and are listed as consequences, never as the cause.
    assert f["consequences"] and all(
        c.startswith(("rank 0:", "rank 1:", "rank 3:")) for c in f["consequences"]
    )
    # The trace up to the failure is kept: rank 2's last instruction is the receive that, in the
    # same step, replaced buffer 0 (old order: RecvActivation before SendGrad).
    mine = sorted((r for r in doc["instructions"] if r["rank"] == 2), key=lambda r: r["start"])
    assert (mine[-1]["step"], mine[-1]["instruction"]) == (6, "RecvActivation(buffer_id=0)")
    assert f["kind"] == "error"
    assert all(KEYS <= set(r) for r in doc["instructions"])


def test_the_explorers_seed_schedule_replayed_on_deepspeed_fails_the_same_way(ds081_env, tmp_path):
    code, doc = _run(
        ["--kind", "deepspeed-train", "--buffers", "fixed", "--order", "legacy"],
        ds081_env,
        tmp_path,
        "replay",
    )
    f = doc["failure"]
    assert code == 1 and (f["rank"], f["stage"], f["step"]) == (2, 2, 6)
    assert f["exception_type"] == "AssertionError"


def test_stock_and_08_style_schedules_give_bitwise_equal_losses(ds081_env, tmp_path, three_engines):
    done = three_engines[0]
    assert done.returncode == 0, done.stderr[-3000:]
    # today's stock schedule on DeepSpeed's engine: the DeepSpeed part of ``--engine all``,
    # the same document ``--engine deepspeed`` prints (``deepspeed_doc``)
    stock = json.loads(done.stdout.strip().splitlines()[-1])["deepspeed_engine"]
    # 0.8.1's own TrainSchedule (the +1 kept, old order), its instruction classes mapped onto today's.
    code_old, old = _run(["--from", OLD_CLASS], ds081_env, tmp_path, "old")
    assert stock["ok"] is True and code_old == 0, (stock["failure"], old["failure"])
    assert stock["bitwise_equal_to_reference"] is True and old["bitwise_equal_to_reference"] is True
    assert len(stock["losses"]) == 8 and stock["losses"] == old["losses"]
    for doc in (stock, old):
        rows = doc["instructions"]
        assert {r["rank"] for r in rows} == {0, 1, 2, 3}
        assert all(KEYS <= set(r) and r["end"] >= r["start"] for r in rows)
        # every instruction of DeepSpeed's schedule ran: 8 forwards and 8 backwards per stage
        for stage in range(4):
            names = [r["instruction"] for r in rows if r["stage"] == stage]
            assert sum(n.startswith("ForwardPass") for n in names) == 8
            assert sum(n.startswith("BackwardPass") for n in names) == 8
        # every message described and matched with its pair on DeepSpeed's own engine
        assert doc["contract"] == [] and any(r.get("p2p") for r in rows)
    # 0.8.1 keeps the +1: stage 0 uses 5 buffers, today's 4
    assert max(r["buffer"] for r in old["instructions"] if r["stage"] == 0) == 4
    assert max(r["buffer"] for r in stock["instructions"] if r["stage"] == 0) == 3


def test_every_rank_is_gone_soon_after_a_failure_even_when_the_failing_rank_stays_alive(
    ds081_env, tmp_path, monkeypatch
):
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.deepspeed.engine import run_deepspeed_engine
    from explorer.pipeline.runtime.spec import Fault, RunSpec

    # two ranks are enough: rank 1 fails and lingers, rank 0 is the one left waiting on it
    spec = RunSpec.for_schedule(
        build("deepspeed-train", 2, 8), fault=Fault(rank=1, step=4, how="linger")
    )
    started = time.time()
    result = run_deepspeed_engine(spec, tmp_path / "linger")
    ended = time.time()
    f = result.failure
    assert (f.rank, f.step) == (1, 4) and "injected fault" in f.message
    assert result.returncodes[1] == -9  # it stayed alive after its error: the launcher ended it
    assert all(c is not None for c in result.returncodes.values())
    reported = min(e["time"] for e in result.details["failures"])
    # It would linger for good: -9 above is the launcher ending it; the bound is a back-stop.
    assert started < reported < ended and ended - reported < 300, f"{ended - reported:.1f} s after"


def test_all_three_engines_side_by_side(ds081_env, tmp_path, three_engines):
    done, folder, page = three_engines
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    side = doc["comparison"]
    assert doc["engine"] == "all" and doc["deepspeed_version"] == "0.19.8"
    assert side["bitwise_equal_to_reference"] == {
        "explorer": True,
        "torch": True,
        "deepspeed": True,
    }
    assert side["explorer_and_deepspeed_bitwise_equal"] is True
    assert side["losses"]["explorer"] == side["losses"]["deepspeed"]
    assert side["why_torch_may_differ"] is None  # M = 8 is a power of two
    rows = {r["kind"]: r for r in side["kinds"]}
    assert rows["F"]["explorer_n"] == rows["F"]["deepspeed_n"] == rows["F"]["torch_n"] == 32
    assert all(v > 0 for v in side["makespan_ms"].values())
    # each engine overlaid on the same simulation, one offline page
    html = page.read_text()
    assert html.count("Plotly.newPlot") == 3 and 'src="http' not in html
    for engine in ("explorer's engine", "_PipelineScheduleRuntime", "PipelineEngine (0.19.8)"):
        assert engine in html
    assert "Measured vs simulated" in html and "No instruction was measured" not in html
    # the DeepSpeed run folder reads back as that engine's run
    read = explorer_cli(["read", str(folder / "deepspeed"), "--json"], ds081_env, tmp_path)
    back = json.loads(read.stdout)
    assert back["engine"] == "deepspeed" and back["bitwise_equal_to_reference"] is True
