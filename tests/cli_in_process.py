"""Run ``explorer ARGS`` two ways: in this interpreter (the fast tier) or in a child (the slow tier).

A CLI test asserts on an exit code and on what reached stdout and stderr. Calling
``explorer.cli.main`` in-process gives the same three things in milliseconds instead of an
interpreter start; the child form also proves what only a fresh process shows (start-up imports,
the real exit status, memory). Tests take the ``explorer_cli`` fixture (``tests/conftest.py``)
and run both ways: in-process in the fast tier, as a child in the slow tier.

pytest's default import mode puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``, which is
how every test folder imports this module.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional, Sequence, Union

__all__ = ["Called", "asked_four_ways", "call_cli", "run_cli_child"]

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Called:
    """What a CLI call left behind, with the field names of ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


def _text_stream() -> io.TextIOWrapper:
    """A captured stream with a ``.buffer``, as ``sys.stdout`` has (commands may write bytes)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="replace", write_through=True)


def _read(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace")  # type: ignore[attr-defined]


def call_cli(argv: Sequence[str], cwd: Union[str, Path, None] = None) -> Called:
    """``explorer.cli.main(ARGV)`` in this interpreter, run in ``cwd``, its output captured.

    The exit code is what ``main`` returns or raises as ``SystemExit`` (argparse's refusals),
    mapped as the interpreter maps it (``None`` is 0, a message is 1). Any other exception
    propagates and fails the test with its traceback, which is what the CLI must never show.
    """
    from explorer.cli import main

    out, err = _text_stream(), _text_stream()
    here = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in argv])
            except SystemExit as exc:
                if exc.code is None or isinstance(exc.code, int):
                    code = exc.code or 0
                else:
                    print(exc.code, file=sys.stderr)
                    code = 1
    finally:
        os.chdir(here)
    return Called(int(code), _read(out), _read(err))


def asked_four_ways(folder: Union[str, Path]) -> dict[str, Called]:
    """What ``read``, ``check``, ``run --collect`` and ``read --json`` say of a run folder: four
    ways of asking one question, which must give one answer."""
    argvs = {
        "read": ["read", str(folder)],
        "check": ["check", str(folder)],
        "collect": ["run", "--collect", str(folder)],
        "json": ["read", str(folder), "--json"],
    }
    return {name: call_cli(argv) for name, argv in argvs.items()}


def run_cli_child(
    argv: Sequence[str],
    cwd: Union[str, Path, None] = None,
    env: Optional[Mapping[str, str]] = None,
    timeout: Optional[float] = 300,
) -> subprocess.CompletedProcess:
    """``python -m explorer.cli ARGV`` in a child, with this checkout first on ``PYTHONPATH``."""
    base = dict(os.environ if env is None else env)
    paths = [str(ROOT), *filter(None, base.get("PYTHONPATH", "").split(os.pathsep))]
    base["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return subprocess.run(
        [sys.executable, "-m", "explorer.cli", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=base,
        timeout=timeout,
    )
