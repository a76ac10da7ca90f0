"""``explorer read PATH``: one door, the kind detected, the same verdict as the command that made it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from explorer.errors import InputError
from explorer.traces.detect import DETECTORS, detect


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
