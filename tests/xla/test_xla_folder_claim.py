"""One ``xla-run`` at a time in an ``--out`` folder: a second is refused before it moves or writes
anything, and a folder it cannot set an earlier run aside in is one line, exit 2.

Two runs started into one folder once set each other's files aside and wrote into one message
log, and ``read`` called the mix one clean run. The folder's lock is held here by this process
(``FolderLock``, as the first run's launcher holds it): the refusal is decided by the kernel's
lock, not by timing two real runs against each other.
"""

from __future__ import annotations

import json
from pathlib import Path

from cli_in_process import call_cli

from explorer.folder_lock import LOCK, FolderLock

TINY = ["xla-run", "--scenario", "steady", "--layers", "1", "--width", "8", "--steps", "2"]


def _earlier_run(folder: Path) -> dict[str, str]:
    """What an earlier xla-run left (its names; their content does not matter here)."""
    files = {"config.json": json.dumps({"scenario": "steady"}), "messages.jsonl": "{}\n"}
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return files


def test_a_folder_another_run_holds_is_refused_and_left_as_it_was(tmp_path):
    folder = tmp_path / "out"
    files = _earlier_run(folder)
    held = FolderLock.claim(folder, "20261206-000000-first")
    try:
        called = call_cli([*TINY, "--out", str(folder)])
    finally:
        held.release()
    assert called.returncode == 2, called
    assert called.stderr.count("\n") == 1 and "Traceback" not in called.stderr
    assert "is in use by another run (run 20261206-000000-first, pid" in called.stderr
    assert sorted(p.name for p in folder.iterdir()) == sorted([*files, LOCK])  # nothing set aside
    assert all((folder / name).read_text() == text for name, text in files.items())


def test_a_previous_that_is_a_file_is_one_line_not_a_traceback(tmp_path):
    folder = tmp_path / "out"
    _earlier_run(folder)
    (folder / "previous").write_text("a note of mine\n")
    called = call_cli([*TINY, "--out", str(folder)])
    assert called.returncode == 2, called
    assert "previous is not a folder" in called.stderr and "Traceback" not in called.stderr
    assert (folder / "previous").read_text() == "a note of mine\n"
    assert (folder / "config.json").exists()  # the earlier run stays where it was
