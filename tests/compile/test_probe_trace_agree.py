"""``compile-probe`` with ``TORCH_TRACE`` set, then ``explorer read`` of the trace it wrote: one
run asked two ways must give one answer.

The structured trace alone never says which iteration compiled, how long each took or which
cached variant ran, so ``read`` of a probe's trace once gave other verdicts than the probe of
the same run: a warm-up recompile (probe: steady, exit 0) read as a finding (exit 1), a cycling
run read as recompiles. The probe now writes each iteration's record into the trace, and
``read`` diagnoses those. Every run here is real ``torch.compile`` (``aot_eager``, seconds each).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from built_once import built_once
from cli_in_process import run_cli_child

pytestmark = pytest.mark.slow

#: A user's step whose first batch has another size: one recompile, in warm-up.
WARM = """
import torch
f = torch.compile(lambda x: (x * 2).sum(), backend="aot_eager", dynamic=False)
def step(i):
    f(torch.ones(4 if i == 0 else 8, 3))
"""
#: A user's step past its recompile limit: modes 4 and 5 run eagerly (no tracking backend).
LIMIT = """
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = 0
    def forward(self, x):
        return x * (self.mode + 1)
m = M()
torch._dynamo.config.recompile_limit = 4
f = torch.compile(m, backend="aot_eager")
def step(i):
    m.mode = i % 6
    f(torch.ones(3))
"""

#: A user's step that resets Dynamo every other iteration: compile 0/0 four times.
RESET = """
import torch
f = torch.compile(lambda x: (x * 2).sum(), backend="aot_eager")
def step(i):
    if i % 2 == 0:
        torch._dynamo.reset()
    f(torch.ones(4))
"""
#: A user's step that raises at iteration 3, and one that ends its process at iteration 2.
ENDS = """
import sys
import torch
f = torch.compile(lambda x: (x * 2).sum(), backend="aot_eager")
def raises(i):
    if i == 3:
        raise RuntimeError("boom at 3")
    f(torch.ones(4))
def exits(i):
    if i == 2:
        sys.exit(0)
    f(torch.ones(4))
"""

CASES = {
    "cycling-scenario": (["--scenario", "cycling", "--backend", "aot_eager"], None),
    "warm-step": (["--step", "warm_step:step", "--iterations", "8"], WARM),
    "limit-step": (["--step", "limit_step:step", "--iterations", "14"], LIMIT),
    "reset-step": (["--step", "reset_step:step", "--iterations", "8"], RESET),
    "raises-step": (["--step", "ends_step:raises", "--iterations", "6"], ENDS),
}


def _probe_then_read(tmp_path: Path, name: str) -> tuple[dict, int, dict, int]:
    argv, source = CASES[name]
    if source is not None:
        (tmp_path / f"{argv[1].split(':')[0]}.py").write_text(source)
    env = dict(os.environ, TORCH_TRACE=str(tmp_path / "trace"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    probe = run_cli_child(["compile-probe", *argv, "--json"], cwd=tmp_path, env=env, timeout=600)
    assert probe.returncode in (0, 1), probe.stderr[-2000:]
    read = run_cli_child(["read", tmp_path / "trace", "--json"], cwd=tmp_path)
    assert read.returncode in (0, 1), read.stderr[-2000:]
    return json.loads(probe.stdout), probe.returncode, json.loads(read.stdout), read.returncode


@pytest.mark.parametrize("name", sorted(CASES))
def test_read_of_the_probes_trace_gives_the_probes_verdict(tmp_path, name):
    probe, probe_rc, read, read_rc = _probe_then_read(tmp_path, name)
    verdict = ("ok", "cause", "period", "cycles", "confidence")
    assert [probe[k] for k in verdict] == [read[k] for k in verdict], (
        probe["diagnosis"],
        read["diagnosis"],
    )
    assert probe_rc == read_rc
    same = ("iteration", "compiled", "variant", "fallback")
    assert [{k: it[k] for k in same} for it in read["iterations"]] == [
        {k: it[k] for k in same} for it in probe["iterations"]
    ]
    # each compile, in order: an id that comes back after torch._dynamo.reset() is another
    # compile (read once folded the four compiles of 0/0 into one, and called the run clean)
    ran = [(c["compile_id"], c["iteration"]) for c in probe["compiles"]]
    assert [(c["compile_id"], c["iteration"]) for c in read["compiles"]] == ran
    # the compile that hits the limit names no function in Dynamo's metrics: the probe once
    # wrote null where read named its frame's function
    named = {c["compile_id"]: c["function"] for c in probe["compiles"]}
    assert named == {c["compile_id"]: c["function"] for c in read["compiles"]}
    assert None not in named.values(), named
    expected = {
        "cycling-scenario": "cycling",
        "warm-step": "steady",
        "limit-step": "eager-fallback",
        "reset-step": "recompiles",
        "raises-step": "steady",
    }
    assert probe["cause"] == expected[name], probe["diagnosis"]
    assert "compile-probe recorded them" in " ".join(read["notes"])
    # how the run ended is the probe's too: a step that raised read as a clean run, exit 0
    assert (read["failure"] or {}).get("message") == (probe["failure"] or {}).get("message")
    assert (probe["failure"] is not None) == (name == "raises-step"), probe["failure"]


def test_a_run_whose_step_ended_its_process_gives_no_clean_verdict(tmp_path):
    """The step's ``sys.exit`` at iteration 2 ended the probe's child: the trace holds two
    iterations and no end of the run, and read of it said "No period", exit 0."""
    (tmp_path / "ends_step.py").write_text(ENDS)
    env = dict(os.environ, TORCH_TRACE=str(tmp_path / "trace"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    argv = ["compile-probe", "--step", "ends_step:exits", "--iterations", "6"]
    probe = run_cli_child(argv, cwd=tmp_path, env=env, timeout=600)
    assert probe.returncode == 1, probe.stderr[-2000:]
    read = run_cli_child(["read", tmp_path / "trace", "--json"], cwd=tmp_path)
    doc = json.loads(read.stdout)
    assert read.returncode == 1 and doc["ok"] is False, doc["diagnosis"]
    assert doc["failure"]["kind"] == "unfinished", doc["failure"]
    assert "recorded 2 of the 6 iterations asked for" in doc["failure"]["message"]
    text = run_cli_child(["read", tmp_path / "trace"], cwd=tmp_path)
    assert text.returncode == 1 and "\nunfinished: compile-probe's run in " in text.stdout


def test_a_probe_record_edited_in_the_trace_is_not_taken_for_the_probes(tmp_path):
    """A trace is input: a record that is not what the probe writes leaves the trace read as any
    job's (no iterations), never as half the probe's."""
    _probe_then_read(tmp_path, "warm-step")
    (log,) = (tmp_path / "trace").glob("dedicated_log_torch_trace*.log")
    text = log.read_text()
    assert '"explorer_probe_iteration"' in text
    log.write_text(text.replace('"compiled": ', '"compiled": "yes", "was": ', 1))
    again = run_cli_child(["read", tmp_path / "trace", "--json"], cwd=tmp_path)
    doc = json.loads(again.stdout)
    assert again.returncode == 1 and doc["iterations"] == []
    assert "compile-probe recorded them" not in " ".join(doc["notes"])
    # and no verdict: what the damaged record said of the run is unknown
    assert (
        doc["failure"]["kind"] == "unfinished" and "cannot all be read" in doc["failure"]["message"]
    )


@pytest.fixture(scope="module")
def two_jobs(tmp_path_factory) -> list[Path]:
    """Two runs of ``compile-probe --nproc 2`` (real gloo ranks), each into its own TORCH_TRACE."""

    def launch():
        folders = []
        for n in (1, 2):
            where = tmp_path_factory.mktemp(f"job{n}")
            env = dict(os.environ, TORCH_TRACE=str(where / "trace"))
            argv = [
                "compile-probe",
                "--scenario",
                "shapes",
                "--iterations",
                "4",
                "--backend",
                "eager",
            ]
            ran = run_cli_child([*argv, "--nproc", "2"], cwd=where, env=env, timeout=600)
            assert ran.returncode in (0, 1), ran.stderr[-2000:]
            folders.append(where / "trace")
        return folders

    return built_once(tmp_path_factory, "compile-probe-two-jobs", launch)


def _rank_file(folder: Path, rank: int) -> Path:
    (found,) = folder.glob(f"dedicated_log_torch_trace_rank_{rank}_*.log")
    return found


def test_rank_files_of_two_jobs_in_one_folder_are_refused(two_jobs, tmp_path):
    """Rank 0 of one job and rank 1 of another, copied into one folder, merged into one clean
    job: each trace names its job at its start now."""
    import shutil

    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(_rank_file(two_jobs[1], 0), mixed)
    shutil.copy(_rank_file(two_jobs[0], 1), mixed)
    got = run_cli_child(["read", mixed], cwd=tmp_path)
    assert got.returncode == 2 and got.stdout == "", got.stdout[-500:]
    assert "holds the traces of 2 jobs" in got.stderr, got.stderr
    for whole in two_jobs:  # each job as it was is still one job
        assert run_cli_child(["read", whole], cwd=tmp_path).returncode in (0, 1)


def test_a_job_missing_a_ranks_trace_gives_no_clean_verdict(two_jobs, tmp_path):
    import shutil

    alone = tmp_path / "rank1_only"
    alone.mkdir()
    shutil.copy(_rank_file(two_jobs[0], 1), alone)
    got = run_cli_child(["read", alone, "--json"], cwd=tmp_path)
    doc = json.loads(got.stdout)
    assert got.returncode == 1 and doc["ok"] is False, doc["diagnosis"]
    assert "the job had 2 ranks and rank 0 left no trace here" in doc["failure"]["message"]
