"""Several ranks: ``compile-probe --nproc N``, the probe inside a user's own step on each rank, DeepSpeed ZeRO-1 vs ZeRO-3.

The merge itself is checked on records; every run is real (gloo process groups on this
machine, real ``torch.compile``), so those tests are ``slow``.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from explorer.compile.analysis.ranks import merge_ranks
from explorer.compile.traces.records import CompileEvent, Iteration, ProbeResult
from tests.cli_contract.contract import Case, assert_bad_input, assert_bad_input_in_process, tiers

ROOT = Path(__file__).resolve().parents[2]


def _rank(ms: list[float], compiles: list[CompileEvent]) -> ProbeResult:
    its = [
        Iteration(
            i,
            m,
            any(c.iteration == i for c in compiles),
            (f"0/{sum(c.iteration <= i for c in compiles) - 1}",),
        )
        for i, m in enumerate(ms)
    ]
    return ProbeResult(its, compiles=compiles)


def test_merge_takes_the_slowest_rank_and_says_who_compiled_what() -> None:
    base = [CompileEvent("0/0", 0, "forward")]
    late = CompileEvent(
        "0/1", 3, "forward", "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6"
    )
    per_rank = {
        0: _rank([900, 1, 1, 1, 1], base),
        1: _rank([800, 1, 1, 400, 2], base + [late]),
        2: _rank([950, 1, 1, 1, 1], base),
        3: _rank([700, 1, 1, 1, 1], base),
    }
    merged = merge_ranks(per_rank, "job")
    assert [it.ms for it in merged.iterations] == [950, 1, 1, 400, 2]
    assert [it.compiled for it in merged.iterations] == [True, False, False, True, False]
    assert merged.iterations[3].variants == ("0/0", "0/1")
    assert [(c.compile_id, c.ranks) for c in merged.compiles] == [
        ("0/0", (0, 1, 2, 3)),
        ("0/1", (1,)),
    ]
    assert merged.divergence[0] == "rank 1 compiled 0/1 at iteration 3; ranks 0, 2, 3 did not"
    assert (
        "Ranks differ: rank 1 compiled 0/1 at iteration 3; ranks 0, 2, 3 did not"
        in merged.diagnosis.sentence
    )
    doc = merged.to_json()
    assert [r["rank"] for r in doc["ranks"]] == [0, 1, 2, 3] and doc["compiles"][1]["ranks"] == [1]


def _cli(*args: str, cwd: Path = ROOT, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", "compile-probe", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=timeout,
        env={"PYTHONPATH": str(ROOT), **_base_env()},
    )


def _base_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


BAD_NPROC = (
    Case(
        "nproc-zero",
        ["compile-probe", "--scenario", "cycling", "--nproc", "0"],
        "nproc must be a positive integer",
    ),
    Case(
        "nproc-65",
        ["compile-probe", "--scenario", "cycling", "--nproc", "65"],
        "limit of 64",
    ),
    Case(
        "nproc-word",
        ["compile-probe", "--scenario", "cycling", "--nproc", "two"],
        "nproc must be a whole number",
    ),
)
IN_PROCESS, THROUGH_THE_CLI = tiers(BAD_NPROC)


@pytest.mark.parametrize("case", IN_PROCESS)
def test_bad_nproc_is_one_line(case: Case, tmp_path: Path) -> None:
    assert_bad_input_in_process(case, tmp_path)


@pytest.mark.parametrize("case", THROUGH_THE_CLI)
def test_bad_nproc_is_one_line_through_the_cli(case: Case, tmp_path: Path) -> None:
    assert_bad_input(case, tmp_path)


@pytest.mark.slow
def test_two_ranks_of_a_preset_merge_into_one_report() -> None:
    out = _cli(
        "--scenario",
        "cycling",
        "--iterations",
        "9",
        "--backend",
        "aot_eager",
        "--nproc",
        "2",
        "--json",
    )
    assert out.returncode == 1, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["kind"] == "compile" and (doc["period"], doc["cause"]) == (3, "cycling"), (
        doc["diagnosis"],
        doc.get("failure"),
    )
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and all(
        r["cause"] == "cycling" for r in doc["ranks"]
    )
    assert [(c["compile_id"], c["ranks"]) for c in doc["compiles"]] == [
        ("0/0", [0, 1]),
        ("0/1", [0, 1]),
        ("0/2", [0, 1]),
    ]
    assert doc["divergence"] == []


@pytest.mark.slow
def test_a_users_step_on_two_ranks_names_the_rank_that_recompiled(tmp_path: Path) -> None:
    (tmp_path / "ranked_step.py").write_text(
        textwrap.dedent("""
        import torch, torch.distributed as dist
        model = torch.compile(torch.nn.Linear(8, 8), backend="aot_eager")
        def step(iteration):
            rows = 6 if dist.get_rank() == 1 and iteration >= 4 else 4
            model(torch.ones(rows, 8)).sum().backward()
    """)
    )
    out = _cli(
        "--step", "ranked_step:step", "--iterations", "8", "--nproc", "2", "--json", cwd=tmp_path
    )
    doc = json.loads(out.stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1], out.stderr[-2000:]
    assert "rank 1 compiled 0/1 at iteration 4; rank 0 did not" in doc["divergence"], doc[
        "divergence"
    ]
    bad = _cli("--step", "no_such_module:step", "--nproc", "2", cwd=tmp_path)
    assert (
        bad.returncode == 2 and len(bad.stderr.splitlines()) == 1 and "no_such_module" in bad.stderr
    )


@pytest.mark.slow
def test_a_rank_that_exits_badly_after_handing_in_its_records_leaves_the_report_whole(
    tmp_path: Path,
) -> None:
    """Rank 0 writes the merged records, then its interpreter exits with 3 (gloo's threads at
    exit do this on a busy machine; here an atexit hook). The report stands and says so."""
    (tmp_path / "late_exit.py").write_text(
        textwrap.dedent("""
        import atexit, os, torch, torch.distributed as dist
        model = torch.compile(torch.nn.Linear(8, 8), backend="aot_eager")
        def step(iteration):
            if iteration == 0 and dist.get_rank() == 0:
                atexit.register(os._exit, 3)
            model(torch.ones(4, 8)).sum().backward()
    """)
    )
    out = _cli(
        "--step", "late_exit:step", "--iterations", "4", "--nproc", "2", "--json", cwd=tmp_path
    )
    doc = json.loads(out.stdout)
    assert doc["failure"] is None and [r["rank"] for r in doc["ranks"]] == [0, 1], doc["failure"]
    assert any(
        "rank 0 exited with code 3 after the records were handed in" in n for n in doc["notes"]
    )


@pytest.mark.slow
def test_the_rank_that_crashed_is_named_not_the_one_that_lost_it(tmp_path: Path) -> None:
    """Rank 1 segfaults at iteration 2; rank 0 then fails in the all-reduce with gloo's
    "Connection reset by peer". The report named rank 0 and its lost connection, and neither
    rank 1 nor SIGSEGV: the rank killed by a signal is the cause, the other its consequence."""
    (tmp_path / "crash_step.py").write_text(
        textwrap.dedent("""
        import ctypes, torch, torch.distributed as dist
        model = torch.compile(torch.nn.Linear(8, 8), backend="eager")
        def step(iteration):
            if iteration == 2 and dist.get_rank() == 1:
                ctypes.string_at(0)
            model(torch.ones(4, 8)).sum().backward()
    """)
    )
    out = _cli(
        "--step", "crash_step:step", "--iterations", "5", "--nproc", "2", "--timeout", "120",
        "--json", cwd=tmp_path,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr[-2000:]
    failure = json.loads(out.stdout)["failure"]
    assert (failure["rank"], failure["signal"]) == (1, "SIGSEGV"), failure
    assert failure["message"].startswith("rank 1 of 2 "), failure["message"]
    assert [c[:7] for c in failure["consequences"]] == ["rank 0 "], failure["consequences"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)
def test_deepspeed_zero1_against_zero3_at_world_size_two() -> None:
    """ZeRO-3's hooks gather and release parameters around every module: many more frames, graph breaks, the limit."""
    docs = {}
    for preset in ("deepspeed", "deepspeed-zero3"):
        out = _cli(
            "--scenario",
            preset,
            "--iterations",
            "9",
            "--backend",
            "aot_eager",
            "--nproc",
            "2",
            "--json",
        )
        docs[preset] = doc = json.loads(out.stdout)
        assert doc["failure"] is None, (doc["error"], out.stderr[-2000:])
        assert doc["ok"] == (out.returncode == 0)
        assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    one, three = docs["deepspeed"], docs["deepspeed-zero3"]
    assert (one["cause"], one["period"]) == ("cycling", 3), one["diagnosis"]
    frames = {
        name: {c["compile_id"].split("/")[0] for c in d["compiles"]} for name, d in docs.items()
    }
    assert len(frames["deepspeed-zero3"]) > 2 * len(frames["deepspeed"]), frames
    limit = [c for c in three["compiles"] if c["failed"] == "RecompileLimitExceeded"]
    assert limit and all(c["ranks"] == [0, 1] for c in limit)
    hooks = [
        c for c in three["compiles"] if c["function"] == "apply_to_tensors_only" and c["reason"]
    ]
    assert hooks and any("deallocated" in c["reason"] for c in hooks), (
        "ZeRO-3's hook closures are freed, so their guards fail"
    )
    assert three["cause"] == "eager-fallback", three["diagnosis"]
    assert any(
        "disable" in g["reason"] or "skip" in g["reason"].lower() for g in three["graph_breaks"]
    )


@pytest.mark.slow
def test_the_probe_as_one_rank_of_a_users_torchrun_job(tmp_path: Path) -> None:
    """The user's own job, started by the real torchrun: every rank calls probe_rank, rank 0 gets the merge."""
    (tmp_path / "train.py").write_text(
        textwrap.dedent("""
        import json, torch, torch.distributed as dist
        from explorer.compile.runtime.distributed import probe_rank
        dist.init_process_group("gloo")
        model = torch.compile(torch.nn.Linear(8, 8), backend="aot_eager")
        def step(iteration):
            rows = 6 if dist.get_rank() == 1 and iteration >= 3 else 4
            model(torch.ones(rows, 8)).sum().backward()
        result = probe_rank(step, 6, label="train")
        if dist.get_rank() == 0:
            print("RESULT " + json.dumps(result.to_json()))
        dist.destroy_process_group()
    """)
    )
    out = subprocess.run(
        # --standalone: a free port of its own, where the default 29500 meets any other
        # torchrun job the suite runs beside it
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "train.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        env={"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **_base_env()},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads(
        next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))[len("RESULT ") :]
    )
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and doc["label"] == "train"
    assert "rank 1 compiled 0/1 at iteration 3; rank 0 did not" in doc["divergence"]


@pytest.mark.parametrize(
    "codes, stopped, logs, cause",
    [
        ({0: 1, 1: -11}, frozenset(), {0: "Connection reset by peer", 1: "[Gloo] connected"}, 1),
        # the supervisor ended rank 0 (SIGKILL) once rank 1 had gone: rank 1's signal is the cause
        ({0: -9, 1: -11}, frozenset({0}), {0: "", 1: ""}, 1),
        # no signal: the rank whose last words are its own, not a lost peer
        (
            {0: 1, 1: 3},
            frozenset(),
            {0: "Read error: Connection reset by peer", 1: "ValueError"},
            1,
        ),
        ({0: 1, 1: 1}, frozenset(), {0: "ValueError: bad", 1: "Connection closed by peer"}, 0),
        ({0: 0, 1: 2}, frozenset(), {0: "", 1: ""}, 1),
    ],
    ids=["segfault", "segfault-peer-killed-by-us", "own-error", "rank0-own", "only-one"],
)
def test_the_cause_is_the_rank_that_went_not_those_that_lost_it(
    tmp_path, codes, stopped, logs, cause
):
    from explorer.compile.runtime.launch import _cause_rank

    for rank, text in logs.items():
        (tmp_path / f"rank{rank}.log").write_text(text + "\n")
    assert _cause_rank(codes, tmp_path, stopped) == cause


@pytest.mark.parametrize(
    "codes, stopped, refused",
    [
        ({0: 2, 1: 2}, frozenset(), 0),
        # rank 1 was still starting when rank 0 refused, and was stopped after the grace
        ({0: 2, 1: -9}, frozenset({1}), 0),
        ({0: -9, 1: 2}, frozenset({0}), 1),
        # a rank that failed on its own in another way: not bad input
        ({0: 2, 1: 1}, frozenset(), None),
        ({0: 2, 1: -11}, frozenset(), None),
        # every rank stopped (a timeout): nobody refused anything
        ({0: -9, 1: -9}, frozenset({0, 1}), None),
        ({0: 0, 1: 0}, frozenset(), None),
    ],
    ids=[
        "both",
        "peer-stopped",
        "rank0-stopped",
        "peer-own-error",
        "peer-segfault",
        "timeout",
        "ok",
    ],
)
def test_bad_input_is_what_every_rank_that_decided_said(codes, stopped, refused) -> None:
    from explorer.compile.runtime.launch import _refused

    assert _refused(codes, stopped) == refused
