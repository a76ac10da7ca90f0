"""``holds_open``: whether a live process is the writer of a given file (a rank of this folder).

A ``cp -r`` of a live run folder names the original ranks' pids; only the file's own inode tells
the copy's reader that those processes write elsewhere. The writer here is this very process
(the live job's case is in ``tests/pipeline/test_doctor_live.py``).
"""

from __future__ import annotations

import os
import shutil

from explorer.processes.ranks import holds_open


def test_the_writer_holds_its_file_and_not_a_copy_of_it_and_still_holds_it_moved(tmp_path):
    own = tmp_path / "run" / "rank0.jsonl"
    own.parent.mkdir()
    own.write_text('{"type": "start"}\n')
    me = os.getpid()
    with open(own, "a"):
        assert holds_open(me, own) is True
        copy = tmp_path / "copy"
        shutil.copytree(own.parent, copy)
        assert holds_open(me, copy / "rank0.jsonl") is False  # same bytes, not its file
        moved = tmp_path / "moved"
        own.parent.rename(moved)
        assert holds_open(me, moved / "rank0.jsonl") is True  # mv keeps the file
        assert holds_open(me, tmp_path / "absent.jsonl") is False
    assert holds_open(me, moved / "rank0.jsonl") is False  # closed


def test_a_pid_whose_files_cannot_be_listed_is_unknown_not_false(tmp_path):
    path = tmp_path / "rank0.jsonl"
    path.write_text("")
    assert holds_open(2**22 + 12345, path) is None  # above Linux's pid limit: no such process
