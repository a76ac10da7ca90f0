"""Standard output that takes nothing is said in one line, exit 2, for every command.

``hlo-diff --json >&-`` raised ``AttributeError: 'NoneType' object has no attribute 'write'``, and
any command's answer sent ``> /dev/full`` raised ``OSError: No space left on device``: each a
traceback and exit 1, which a script reads as "a finding". Run in this process: ``main`` is
handed the streams the interpreter would hold.
"""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from explorer.cli import main

from .contract import HLO_DATA

PAIR = [str(HLO_DATA / "order_a.hlo.txt"), str(HLO_DATA / "order_b.hlo.txt")]
COMMANDS = {
    "hlo-diff-json": ["hlo-diff", "--json", *PAIR],
    "hlo-diff-text": ["hlo-diff", *PAIR],
    "hlo-list-json": ["hlo-list", "--json", PAIR[0]],
    "check": ["check", "--kind", "1f1b", "--stages", "2", "--microbatches", "2"],
    "schedule-json": ["schedule", "--kind", "gpipe", "--stages", "2", "--microbatches", "2", "--format", "json"],
}  # fmt: skip


def _main_with_output(argv: list[str], output: object) -> tuple[int, str, object]:
    """``main(argv)`` with ``output`` as standard output: its code, its stderr, and the stdout it
    left in place (the caller's own, whatever happened)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(output):  # type: ignore[type-var]
        code = main(argv)
        left = os.sys.stdout
    return code, err.getvalue(), left


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_full_device_is_one_line_and_exit_2(argv):
    full = open("/dev/full", "w")
    try:
        code, err, left = _main_with_output(argv, full)
        assert left is full  # an in-process caller gets its own stream back
    finally:
        with contextlib.suppress(OSError):  # what it still holds cannot be written either
            full.close()
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "cannot be written to standard output (No space left on device)" in err, err


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_closed_output_is_refused_before_any_work(argv):
    code, err, left = _main_with_output(argv, None)
    assert left is None
    assert code == 2 and err.count("\n") == 1, err
    assert "standard output is closed (>&-)" in err, err


def test_an_output_that_takes_the_answer_gets_all_of_it():
    out = io.StringIO()
    code, err, left = _main_with_output(COMMANDS["hlo-diff-json"], out)
    assert (code, err, left) == (1, "", out)
    assert out.getvalue().startswith("{") and out.getvalue().endswith("}\n")


class _ReaderLeft(io.StringIO):
    """A pipe whose reader left (``| head``): every write is a broken pipe."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("argv", COMMANDS.values(), ids=COMMANDS.keys())
def test_a_reader_that_left_is_141_never_a_traceback(argv):
    """Told apart from a full device: the stream's failure that is a broken pipe keeps 141."""
    code, err, _ = _main_with_output(argv, _ReaderLeft())
    assert (code, err) == (141, "")
