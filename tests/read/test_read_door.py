"""``explorer read PATH``: one door, the kind detected, the same verdict as the command that made it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.errors import InputError
from explorer.read import DETECTORS, detect


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_what_cannot_be_read_is_one_line_listing_what_can(explorer_cli, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError) as err:
        detect(tmp_path / "notes.txt")
    assert all(d.kind in str(err.value) for d in DETECTORS)
    out = explorer_cli("read", str(tmp_path / "nothing-here"))
    assert (
        out.returncode == 2 and "does not exist" in out.stderr and len(out.stderr.splitlines()) == 1
    )


def test_the_refusal_of_an_unknown_folder_is_short_enough_to_keep_what_to_do(
    explorer_cli, tmp_path
):
    """Each kind's description made it over 1,000 characters, cut before the instruction."""
    folder = tmp_path / ("a-folder-with-a-long-name-" * 8)
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    out = explorer_cli("read", str(folder))
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    line = out.stderr.strip()
    assert "characters in all" not in line and len(line) < 500, line
    assert all(d.kind in line for d in DETECTORS), line
    assert line.endswith(
        "give a file or folder a job left behind; explorer read --help says what each kind holds"
    )
    helped = explorer_cli("read", "--help")
    assert all(f"{d.kind}: {d.what[:20]}" in helped.stdout for d in DETECTORS), helped.stdout


def test_a_log_named_like_a_torch_trace_that_is_not_one_is_named(explorer_cli, tmp_path):
    """Not the list of every kind: the file that looked like a TORCH_TRACE log, and why it is not."""
    (tmp_path / "dedicated_log_torch_trace_rank_0_abc.log").write_text("garbage, not a trace\n")
    out = explorer_cli("read", ".", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert (
        "the TORCH_TRACE log 'dedicated_log_torch_trace_rank_0_abc.log' could not be read: it "
        "does not start with a structured-trace line" in out.stderr
    ), out.stderr


@pytest.mark.slow
def test_a_run_folder_reads_back_with_the_verdict_the_run_gave(tmp_path):
    folder = tmp_path / "run"
    ran = cli(
        "run",
        "--kind",
        "deepspeed-train",
        "--stages",
        "2",
        "--microbatches",
        "4",
        "--out",
        str(folder),
        "--json",
    )
    assert ran.returncode == 0, ran.stderr
    assert detect(folder).kind == "pipeline-run"
    read = cli("read", str(folder), "--json")
    assert read.returncode == 0, read.stderr
    doc, original = json.loads(read.stdout), json.loads(ran.stdout)
    assert doc["kind"] == "pipeline" and doc["losses"] == original["losses"]
    assert doc["bitwise_equal_to_reference"] is True and len(doc["instructions"]) == len(
        original["instructions"]
    )
    text = cli("read", str(folder))
    assert text.returncode == 0 and text.stdout.startswith("ok: 4 micro-batch losses")


def test_an_empty_path_is_refused_not_read_as_the_current_folder(explorer_cli, tmp_path):
    """``Path('')`` is ``.``: the folder the user stands in was read as if they had named it."""
    (tmp_path / "spec.json").write_text("{")  # a folder that would be read, and refused otherwise
    (tmp_path / "rank0.jsonl").write_text("")
    out = explorer_cli("read", "", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "argument PATH: the path is empty; give a file or folder" in out.stderr, out.stderr


def test_a_device_or_a_pipe_is_refused_in_one_line(explorer_cli, tmp_path):
    """Not a traceback from listing /dev/null as a folder, nor a read that blocks on a pipe."""
    import os

    os.mkfifo(tmp_path / "pipe")
    for path in ("/dev/null", str(tmp_path / "pipe")):
        out = explorer_cli("read", path)
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
        assert "neither a regular file nor a folder" in out.stderr


@pytest.mark.parametrize(
    "times, words",
    [
        ('"ts": 1e400, "dur": 1', "event 'PP:0F0' has ts=inf"),  # a float that overflows
        ('"ts": 1, "dur": NaN', "NaN is not a JSON number"),
        ('"ts": 1e300, "dur": 1', "event 'PP:0F0' has ts=1e+300"),
        ('"ts": 1, "dur": -5', "event 'PP:0F0' lasts dur=-5"),
        ('"ts": 1, "dur": 1e20', "event 'PP:0F0' lasts dur=1e+20"),
        # JSON integers have no size limit: one of 401 digits overflows a float conversion
        (f'"ts": {"9" * 401}, "dur": 1', "(401 characters), dur=1: times must be finite"),
        (f'"ts": 1, "dur": {"9" * 401}', "(401 characters) us: durations must be between"),
    ],
    ids=["overflowing-ts", "nan-dur", "huge-ts", "negative-dur", "huge-dur", "int-ts", "int-dur"],
)
def test_a_profiler_trace_with_impossible_times_is_refused_naming_the_event(
    explorer_cli, tmp_path, times, words
):
    """Damaged numbers would otherwise put inf or nan into every bubble and critical path."""
    path = tmp_path / "rank0_trace.json"
    path.write_text(
        '{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": '
        f'[{{"ph": "X", "name": "PP:0F0", "pid": 0, "tid": 0, {times}}}]}}'
    )
    out = explorer_cli("read", str(path))
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert words in out.stderr, out.stderr


@pytest.mark.parametrize("base", ["9" * 401, "1e400"], ids=["401-digit-integer", "overflowing"])
def test_a_profiler_trace_with_an_impossible_clock_base_is_refused(explorer_cli, tmp_path, base):
    """The base is added to every time: an integer too large for a float is refused like inf."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "rank0.pt.trace.json").write_text(
        f'{{"distributedInfo": {{"rank": 0}}, "baseTimeNanoseconds": {base}, "traceEvents": '
        '[{"ph": "X", "name": "c10d::send", "cat": "cpu_op", "ts": 1, "dur": 1}]}'
    )
    out = explorer_cli("read", "job", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert "job/rank0.pt.trace.json" in out.stderr and "baseTimeNanoseconds" in out.stderr


def test_profiler_traces_that_name_no_rank_are_told_apart_from_no_artifact(explorer_cli, tmp_path):
    """One process's trace (gzipped, as tensorboard_trace_handler may write it) without its
    TORCH_TRACE logs: the refusal says what the traces lack, not that nothing is there."""
    import gzip

    doc = {"schemaVersion": 1, "traceEvents": [{"ph": "X", "name": "ProfilerStep#0", "ts": 1}]}
    (tmp_path / "host_1.pt.trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    out = explorer_cli("read", ".", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and len(out.stderr.splitlines()) == 1
    assert "'.' holds 1 profiler trace(s) but none names its rank" in out.stderr, out.stderr


def test_a_folder_holding_a_pipe_or_a_device_link_is_refused_before_any_read(
    explorer_cli, tmp_path
):
    """A FIFO in the folder blocked ``read`` for ever; a link to /dev/zero named like an XLA
    dump filled the memory until the kernel killed the reader."""
    import os

    piped, linked = tmp_path / "piped", tmp_path / "linked"
    piped.mkdir()
    linked.mkdir()
    os.mkfifo(piped / "rank0.jsonl")
    (linked / "module_0001.before_optimizations.txt").symlink_to("/dev/zero")
    for folder, kind in ((piped, "FIFO"), (linked, "device")):
        for command in ("read", "doctor"):
            out = explorer_cli(command, str(folder))
            assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
            assert kind in out.stderr and "not a file" in out.stderr, out.stderr
    out = explorer_cli("read", "/proc")
    assert out.returncode == 2 and "kernel file system" in out.stderr, out.stderr
    # "/" holds /proc: the walk met a kernel FIFO there and told the user to remove it
    for command in ("read", "doctor"):
        out = explorer_cli(command, "/")
        assert out.returncode == 2 and "is the root of the file system" in out.stderr, out.stderr


@pytest.mark.slow
def test_a_pipe_in_a_run_folder_is_refused_alike_by_every_command(cli_1f1b_run, tmp_path):
    """A FIFO put at ``exit_codes.json`` of a real run: ``read`` and ``doctor`` refused it in
    one line, while ``check`` and ``run --collect`` opened it and blocked for ever."""
    import os
    import shutil

    from cli_in_process import run_cli_child

    folder = Path(shutil.copytree(cli_1f1b_run.folder, tmp_path / "run"))
    (folder / "exit_codes.json").unlink()
    os.mkfifo(folder / "exit_codes.json")
    for argv in (["read"], ["check"], ["run", "--collect"], ["doctor"]):
        out = run_cli_child([*argv, str(folder)], timeout=60)  # a child: a hang ends
        assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, (argv, out.stderr)
        assert "codes.json" in out.stderr and "is a FIFO" in out.stderr, (argv, out.stderr)
