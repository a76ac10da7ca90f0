"""``hlo-diff`` and ``hlo-list`` end their process without the interpreter's teardown
(``explorer.cli._exit_without_teardown``): what they printed must still all be out, whether
standard output is buffered or not, and a reader that left is still exit 141."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from explorer.cli import main

from .contract import ROOT

DATA = ROOT / "tests" / "data" / "hlo"
PAIR = [str(DATA / "encoder_large_step1.hlo.txt.gz"), str(DATA / "encoder_large_step2.hlo.txt.gz")]


def _env(buffered: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    return env


def _in_process(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize("buffered", [True, False], ids=["buffered", "unbuffered"])
@pytest.mark.parametrize(
    "argv",
    [["hlo-diff", *PAIR, "--json"], ["hlo-diff", *PAIR], ["hlo-list", PAIR[0], "--json"]],
    ids=["diff-json", "diff-text", "list-json"],
)
def test_what_the_command_printed_is_all_out_when_it_ends(argv, buffered):
    code, expected = _in_process(*argv)
    done = subprocess.run(
        [sys.executable, "-m", "explorer", *argv],
        capture_output=True, text=True, cwd=ROOT, env=_env(buffered), timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stdout) == (code, expected), done.stderr[-2000:]
    assert done.stderr == ""
    if argv[-1] == "--json":
        json.loads(done.stdout)  # whole, not cut at a buffer's edge


@pytest.mark.slow
def test_a_reader_gone_before_the_buffered_answer_is_flushed_is_exit_141():
    """Buffered, the answer is only written at the flush before the early exit: that write
    meets the closed pipe, and the verdict must still not read as 0 or end in a traceback."""
    read, write = os.pipe()
    os.close(read)
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "hlo-diff", *PAIR, "--json"],
        stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(True), timeout=120,
    )  # fmt: skip
    os.close(write)
    assert done.returncode == 141 and "Traceback" not in done.stderr, done.stderr[-2000:]


def test_in_process_callers_get_the_code_back_and_keep_their_process():
    """``main`` is called in process by notebooks and tests: only the program's own entry
    points may end the process."""
    code, text = _in_process("hlo-list", PAIR[0], "--json")
    assert code == 0 and json.loads(text)[0]["instructions"] > 20_000
