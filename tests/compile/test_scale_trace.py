"""``explorer read`` on a TORCH_TRACE folder of hundreds of ranks, made from a real recording.

The ``diverge`` job runs once per test session under real ``torch.compile`` with ``TORCH_TRACE``
set (two gloo ranks; rank 1 recompiles its forward on a size guard); :mod:`replicated_compile`
copies its two logs into hundreds of ranks by text, the recompiling one at planted ranks. The
planted ranks must be named, and nobody else; a broken folder names each bad rank and reads the
rest; a folder of two runs is refused in one line.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from built_once import built_once
from cli_in_process import run_cli_child
from replicated_compile import log_name, replicate

from explorer.compile.analysis.job import read_folded
from explorer.compile.runtime.example_job import record

pytestmark = pytest.mark.slow
PLANTED = (137, 402)


@pytest.fixture(scope="session")
def recorded(tmp_path_factory) -> Path:
    """The real two-rank recording, made once per test run."""
    return built_once(
        tmp_path_factory,
        "compile-diverge-recording",
        lambda: record("diverge", tmp_path_factory.mktemp("diverge"), iterations=6, at=3),
    )


def _read(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return run_cli_child(["read", folder, *args])


def test_the_planted_ranks_are_named_and_nobody_else(recorded, tmp_path) -> None:
    job = replicate(recorded, tmp_path / "job", 512, PLANTED)
    out = _read(job, "--json", "--workers", "2")
    assert out.returncode == 1, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    assert doc["folded"] and doc["read"] == 512 and doc["unread"] == [] and doc["workers"] == 2
    majority, odd = doc["groups"]
    assert majority["count"] == 510 and majority["ranks"] == [[0, 136], [138, 401], [403, 511]]
    assert odd["ranks"] == [[137, 137], [402, 402]]
    assert [c["compile_id"] for c in odd["compiles"]] == ["0/0", "0/1"]
    assert (
        odd["differs"][0].startswith("also compiled 0/1") and "size mismatch" in odd["differs"][0]
    )
    text = _read(job)
    assert text.returncode == 1
    lines = text.stdout.splitlines()
    assert lines[1].startswith("ranks 0-511 but 137, 402 (510 ranks): compiled 0/0"), lines[1]
    assert lines[2].startswith("ranks 137, 402 also compiled 0/1"), lines[2]
    assert len(text.stdout) < 4000, "never a list of every rank"


def test_copies_of_one_rank_are_one_story_and_exit_zero(recorded, tmp_path) -> None:
    job = replicate(recorded, tmp_path / "job", 600)
    out = _read(job, "--json")
    doc = json.loads(out.stdout)
    assert out.returncode == 0, doc["diagnosis"]
    assert [g["ranks"] for g in doc["groups"]] == [[[0, 599]]] and doc["divergence"] == []


def test_one_process_and_two_give_the_same_answer(recorded, tmp_path) -> None:
    job = replicate(recorded, tmp_path / "job", 96, (5, 77))
    one = read_folded(job, workers=1)
    two = read_folded(job, workers=2)
    assert [(g.ranks, g.story) for g in one.groups] == [(g.ranks, g.story) for g in two.groups]


def _broken(recorded: Path, folder: Path) -> Path:
    replicate(recorded, folder, 64, (40,))
    (folder / log_name(5)).write_bytes(b"")
    (folder / log_name(0)).write_text("this is not a structured trace\n")  # first: detection too
    data = (folder / log_name(12)).read_bytes()
    (folder / log_name(12)).write_bytes(data[: len(data) // 2])
    (folder / log_name(20)).unlink()
    shutil.copy(folder / log_name(30), folder / "dedicated_log_torch_trace_rank_30_second.log")
    shutil.copy(folder / log_name(34), folder / log_name(33))
    shutil.copy(folder / log_name(1), folder / "dedicated_log_torch_trace_early.log")
    (folder / "notes.txt").write_text("not a log, not named as one: not read\n")
    return folder


def test_a_broken_folder_names_each_bad_rank_and_reads_the_rest(recorded, tmp_path) -> None:
    folder = _broken(recorded, tmp_path / "job")
    out = _read(folder, "--json")
    assert out.returncode == 1, out.stderr[-2000:]
    doc = json.loads(out.stdout)
    why = {tuple(map(tuple, u["ranks"])): u["why"] for u in doc["unread"]}
    assert why[((5, 5),)] == "its log is empty"
    assert why[((0, 0),)] == "its log holds no structured-trace record"
    assert why[((12, 12),)].startswith("its log ends in a cut line")
    assert why[((20, 20),)] == "no log"
    assert why[((30, 30),)].startswith("two logs or more")
    assert why[((33, 33),)].startswith("its log's records name another rank")
    assert len(why) == 6, why
    assert any(
        "name no rank" in n and "dedicated_log_torch_trace_early.log" in n for n in doc["notes"]
    )
    groups = {tuple(map(tuple, g["ranks"])): g for g in doc["groups"]}
    assert ((40, 40),) in groups, "the planted outlier is still named beside the bad ranks"
    assert doc["read"] == 64 - 5  # 0, 5, 20, 30, 33 not read; 12 read up to its cut
    text = _read(folder).stdout
    assert "not read in full: rank 20: no log" in text and "rank 40 also compiled 0/1" in text


def test_a_folder_of_two_runs_is_refused_in_one_line(recorded, tmp_path) -> None:
    folder = replicate(recorded, tmp_path / "job", 16)
    for r in range(16):
        shutil.copy(folder / log_name(r), folder / f"dedicated_log_torch_trace_rank_{r}_again.log")
    out = _read(folder)
    assert out.returncode == 2 and out.stdout == ""
    assert "two runs in one folder" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_ctrl_c_keeps_what_was_read_and_says_so(recorded, tmp_path) -> None:
    folder = replicate(recorded, tmp_path / "job", 64, (3,))

    def stop_after_ten(done: int, total: int) -> None:
        if done == 10:
            raise KeyboardInterrupt

    job = read_folded(folder, stop_after_ten, workers=1)
    assert job.interrupted and job.read == 10
    assert [u.rank for u in job.unread] == list(range(10, 64))
    assert {u.why for u in job.unread} == {"not read (interrupted)"}
