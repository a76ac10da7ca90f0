"""``explorer read`` on what real compiled jobs leave behind: TORCH_TRACE folders and profiler traces.

Every folder is written in the test by :mod:`explorer.compile.runtime.example_job` running under real
``torch.compile`` with ``TORCH_TRACE`` set and ``torch.profiler`` on a schedule, and read back
through the CLI: the compiles, every failed guard, the iterations, the variants, the period.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import run_cli_child

from explorer.compile.analysis.from_trace import read_job
from explorer.compile.runtime.example_job import record
from explorer.read import detect

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """Each example job run once (for real, in child processes) and shared by the tests that read it."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            cache[name] = record(
                name, tmp_path_factory.mktemp(name), iterations=16 if name == "period4" else 12
            )
        return cache[name]

    return get


def _read(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli_child(["read", folder, *args])


def test_cycling_job_reads_back_as_the_probe_would_report_it(jobs) -> None:
    folder = jobs("cycling")
    assert detect(folder).kind == "torch-trace"
    out = _read(folder, "--json")
    assert out.returncode == 1, out.stderr  # a finding: a period
    doc = json.loads(out.stdout)
    assert doc["kind"] == "compile" and doc["source"] == "TORCH_TRACE"
    assert (doc["period"], doc["cause"], doc["confidence"]) == (3, "cycling", "confirmed"), doc[
        "diagnosis"
    ]
    forward = [c for c in doc["compiles"] if c["function"] == "forward"]
    assert [(c["compile_id"], c["iteration"]) for c in forward] == [
        ("0/0", 0),
        ("0/1", 1),
        ("0/2", 2),
    ]
    assert forward[0]["reasons"] == [] and "self.mode == 0" in forward[1]["reason"]
    assert [r.split("#")[0].strip() for r in forward[2]["reasons"]] == [
        "0/1: self.mode == 1",
        "0/0: self.mode == 0",
    ]
    assert all(c["seconds"] > 0 for c in doc["compiles"])
    assert [it["iteration"] for it in doc["iterations"]] == list(range(12))
    assert [it["compiled"] for it in doc["iterations"]] == [True] * 3 + [False] * 9
    assert [it["variant"].split("+")[0] for it in doc["iterations"]] == [
        f"0/{i % 3}" for i in range(12)
    ]
    breaks = doc["graph_breaks"]
    assert len(breaks) == 1 and "graph_break()" in breaks[0]["reason"], breaks
    assert breaks[0]["compile_ids"] == ["0/0", "0/1", "0/2"]  # logged at every compile, kept once
    assert [r["rank"] for r in doc["ranks"]] == [0] and doc["ranks"][0]["profiles"]
    text = _read(folder)
    assert (
        text.returncode == 1 and "Cycling among 3 cached variants every 3 iterations" in text.stdout
    )
    assert "compile 0/1 at iteration 1 (forward): self.mode == 0" in text.stdout


def test_recompile_limit_every_failed_guard_and_the_eager_fallback(jobs) -> None:
    doc = json.loads(_read(jobs("limit"), "--json").stdout)
    limit = [c for c in doc["compiles"] if c["failed"]]
    assert (
        len(limit) == 1
        and limit[0]["failed"] == "RecompileLimitExceeded"
        and limit[0]["iteration"] == 8
    )
    guards = [r.split("#")[0].strip() for r in limit[0]["reasons"]]
    assert len(guards) == 3 and any(
        "size mismatch at index 0. expected 4, actual 6" in g for g in guards
    ), guards
    assert doc["cause"] == "eager-fallback", doc["diagnosis"]
    assert "size mismatch" in doc["diagnosis"], (
        "the fallback names every guard that failed, not just the first"
    )
    fell = [it["iteration"] for it in doc["iterations"] if it["fallback"]]
    assert fell == list(range(8, 12)) and all(
        it["variant"] == "eager" for it in doc["iterations"][8:]
    )
    assert doc["iterations"][3]["variant"] == "0/0" and doc["iterations"][3]["compiled"] is False


def test_a_trace_without_a_profiler_says_what_cannot_be_known(jobs, tmp_path) -> None:
    only = tmp_path / "only_trace"
    shutil.copytree(jobs("limit") / "torch_trace", only)
    out = _read(only, "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["iterations"] == [] and doc["period"] is None
    assert doc["cause"] == "eager-fallback" and all(c["iteration"] == -1 for c in doc["compiles"])
    assert any("cannot be known" in n and "torch.profiler.schedule(" in n for n in doc["notes"]), (
        doc["notes"]
    )
    text = _read(only).stdout
    assert (
        "at an unknown iteration" in text and "note: TORCH_TRACE has no iteration records" in text
    )


def test_period_four_from_sixteen_profiled_iterations_is_tentative(jobs) -> None:
    doc = json.loads(_read(jobs("period4"), "--json").stdout)
    assert (doc["cause"], doc["period"], doc["confidence"]) == ("unrelated", 4, "tentative"), doc[
        "diagnosis"
    ]
    assert (
        "iteration % 4 == 3" in doc["diagnosis"]
        and "run more iterations to confirm" in doc["diagnosis"]
    )
    assert len(doc["iterations"]) == 16


def test_two_ranks_merge_and_say_which_rank_recompiled(jobs) -> None:
    folder = jobs("diverge")
    assert len(list((folder / "torch_trace").glob("dedicated_log_torch_trace_rank_*"))) == 2
    doc = json.loads(_read(folder, "--json").stdout)
    assert [r["rank"] for r in doc["ranks"]] == [0, 1] and all(r["profiles"] for r in doc["ranks"])
    recompile = [c for c in doc["compiles"] if c["compile_id"] == "0/1"]
    assert recompile and recompile[0]["ranks"] == [1] and recompile[0]["iteration"] == 5
    assert "size mismatch" in recompile[0]["reason"]
    assert "rank 1 compiled 0/1 at iteration 5; rank 0 did not" in doc["divergence"], doc[
        "divergence"
    ]
    assert "Ranks differ: rank 1 compiled 0/1 at iteration 5; rank 0 did not" in doc["diagnosis"]
    it5 = doc["iterations"][5]
    assert it5["compiled"] is True and set(it5["variant"].split("+")) == {"0/0", "0/1"}


def test_one_rank_file_and_the_python_reader_agree(jobs) -> None:
    folder = jobs("diverge")
    one = next((folder / "torch_trace").glob("dedicated_log_torch_trace_rank_1_*"))
    doc = json.loads(_read(one, "--json").stdout)
    assert [r["rank"] for r in doc["ranks"]] == [1] and doc["iterations"] == []
    merged = read_job(folder)
    assert [c.compile_id for c in merged.compiles if c.ranks == (1,)] == ["0/1"]


def test_compile_explorer_opens_a_trace_folder(jobs) -> None:
    from explorer.compile.app import CompileExplorer

    app = CompileExplorer.open(jobs("diverge"))
    assert app.result is not None and [r["rank"] for r in app.result.ranks] == [0, 1]
    assert (
        "Ranks differ." in app.summary.value
        and "rank 1 compiled 0/1 at iteration 5" in app.summary.value
    )
    bars = [t for t in app.figures()[0].to_dict()["data"] if t["type"] == "bar"]
    assert sorted(x for t in bars for x in t["x"]) == list(range(12))
    table = app.figures()[1].to_dict()["data"][0]["cells"]["values"]
    assert "0/1" in table[0] and "rank 1 compiled 0/1" in app._repr_html_()
    # the controls describe the job read, not a probe scenario: Run is off until one is chosen
    assert app.scenario.value is None and app.iterations.value == 12 and app.run_button.disabled
    assert "backend <code>-</code>" not in app.summary.value
    assert app.backend.value == (app.result.backend or None)
    assert "choose a scenario to probe one" in app.status.value
    app.scenario.value = "cycling"
    assert not app.run_button.disabled and app.backend.value is not None


def test_a_profiler_trace_recorded_without_a_schedule_is_named_and_not_used(jobs, tmp_path) -> None:
    import torch

    folder = tmp_path / "job"
    shutil.copytree(jobs("cycling") / "torch_trace", folder / "torch_trace")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        torch.ones(4, 4).mm(torch.ones(4, 4))
    prof.export_chrome_trace(str(folder / "no_schedule.json"))
    out = _read(folder, "--json")
    assert out.returncode in (0, 1) and out.stdout, (out.returncode, out.stderr[-2000:])
    doc = json.loads(out.stdout)
    assert doc["iterations"] == [] and doc["cause"] == "recompiles"
    assert any("no_schedule.json" in n and "without schedule=" in n for n in doc["notes"]), doc[
        "notes"
    ]


_RANK_TAGGED_PROFILE = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo", store=dist.FileStore(sys.argv[1], 1), rank=0, world_size=1)
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
    torch.ones(4, 4).mm(torch.ones(4, 4))
prof.export_chrome_trace(sys.argv[2])
dist.destroy_process_group()
"""


def test_a_compile_job_with_rank_tagged_profiler_traces_still_reads_as_torch_trace(
    jobs, tmp_path
) -> None:
    """A process group makes the profiler write distributedInfo; the TORCH_TRACE logs still decide.

    The trace is written in a child: a process group is per process, and a test before this one in
    the same pytest worker may hold one (init_process_group refuses a second).
    """
    folder = tmp_path / "job"
    shutil.copytree(jobs("cycling") / "torch_trace", folder / "torch_trace")
    trace = folder / "rank0_trace.json"
    subprocess.run(
        [sys.executable, "-c", _RANK_TAGGED_PROFILE, str(tmp_path / "store"), str(trace)],
        check=True,
        timeout=300,
    )
    assert "distributedInfo" in trace.read_text()
    assert detect(folder).kind == "torch-trace"


@pytest.mark.parametrize("inside", ["record", "payload"])
def test_a_cut_log_gives_no_clean_verdict(jobs, tmp_path, inside) -> None:
    """The cycling job's log cut mid-line, as a job stopped while writing leaves it: once read as
    'No recompile, steady', exit 0. What the log no longer says may be the recompile: exit 1,
    ``ok`` false, the cut named. A cut inside a payload line (tab-led, most of a trace's bytes)
    was not seen as one."""
    (log,) = sorted(jobs("cycling").glob("**/dedicated_log_torch_trace*.log"))
    data = log.read_bytes()
    line = re.compile(rb"\n\t" if inside == "payload" else rb"\n[^\t]")
    found = line.search(data, 4096)  # the first such line after the first 4 KB
    assert found is not None
    cut_at = found.start() + 16  # 15 bytes into that line
    folder = tmp_path / "cut"
    folder.mkdir()
    (folder / log.name).write_bytes(data[:cut_at])
    out = _read(folder, "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 1 and doc["ok"] is False, out.stderr
    assert doc["failure"]["kind"] == "unfinished" and "cut line" in doc["failure"]["message"]


def test_a_file_read_alone_and_lines_that_are_no_record_are_said(jobs, tmp_path) -> None:
    """``read DIR`` and ``read DIR/the.log`` of one job gave two verdicts (cycling from the
    folder's profiler traces, recompiles from the file alone) with nothing saying why; and a
    file of one record among garbage lines read as a clean trace."""
    folder = jobs("cycling")
    (log,) = sorted(folder.glob("**/dedicated_log_torch_trace*.log"))
    alone = json.loads(_read(log, "--json").stdout)
    assert any("were not read (a file was given" in n for n in alone["notes"]), alone["notes"]
    assert not any(
        "were not read (a file" in n for n in json.loads(_read(folder, "--json").stdout)["notes"]
    )
    edited = tmp_path / log.name
    edited.write_text(log.read_text() + "not a record\nnor this\n")
    doc = json.loads(_read(edited, "--json").stdout)
    assert any(n.startswith("2 line(s) are neither a record nor a payload") for n in doc["notes"])
