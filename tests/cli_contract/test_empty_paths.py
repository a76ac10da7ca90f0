"""An empty path is never the current folder: every command that takes a folder or a file refuses
``''`` in one line (``Path('')`` is ``.``, so ``check ''`` used to check whatever run folder the
user stood in, as if they had named it)."""

from __future__ import annotations

import pytest
from cli_in_process import call_cli

CASES = {
    "read": (["read", ""], "the path is empty"),
    "check-run-folder": (["check", ""], "the path is empty"),
    "doctor-target": (["doctor", ""], "give a process id"),
    "doctor-folder": (["doctor", "123", "--folder", ""], "the path is empty"),
    "doctor-save": (["doctor", "123", "--save", ""], "the path is empty"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_empty_path_is_refused_in_one_line(name: str) -> None:
    argv, words = CASES[name]
    called = call_cli(argv)
    lines = called.stderr.strip().splitlines()
    assert called.returncode == 2 and called.stdout == "" and len(lines) == 1, called.stderr
    assert words in lines[0] and "Traceback" not in called.stderr
