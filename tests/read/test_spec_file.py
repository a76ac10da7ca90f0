"""A run or job folder's spec.json that ``explorer run`` would not have written: one line naming
the file and the field, for every command that reads the folder (``read``, ``check``).

The folders are written here: a real spec of 1F1B on 2 ranks, one field edited, beside the rank
files of a job of 3 ranks (so the job reader's detection reads the spec too).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime.spec import RunSpec

RANKS = "stage_to_rank must be a list of rank integers, one per stage, each 0 <= rank < world size"


def _folder(root: Path, stage_to_rank: str) -> Path:
    """A job folder whose spec's stage_to_rank is the JSON text ``stage_to_rank``."""
    spec = RunSpec.for_schedule(build("1f1b", 2, 2)).to_json()
    spec["schedule"]["stage_to_rank"] = "@"
    folder = root / "job"
    folder.mkdir()
    text = json.dumps(spec).replace('"@"', stage_to_rank)
    (folder / "spec.json").write_text(text)
    for rank in range(3):
        (folder / f"rank{rank}.jsonl").write_text("")
    return folder


@pytest.mark.parametrize("command", ["read", "check"])
@pytest.mark.parametrize(
    "stage_to_rank",
    [
        "[[0], [1]]",
        '[{"a": 1}]',
        "[0, 1e400]",
        '["0", "x"]',
        "[0, 1.5]",
        "[0, -1]",
        "[0, 2]",
        "[true, false]",
        f"[0, {'9' * 401}]",
        "[]",
        '"01"',
    ],
    ids=[
        "lists",
        "objects",
        "overflowing-float",
        "strings",
        "fraction",
        "negative",
        "beyond-the-stages",
        "booleans",
        "401-digits",
        "empty",
        "a-string",
    ],
)
def test_a_stage_to_rank_of_anything_but_ranks_is_one_line_naming_the_file(
    explorer_cli, tmp_path, command, stage_to_rank
) -> None:
    _folder(tmp_path, stage_to_rank)
    out = explorer_cli(command, "job", cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert f"'job/spec.json': {RANKS}" in out.stderr, out.stderr


def test_a_nan_rank_is_refused_by_read_and_check(explorer_cli, tmp_path) -> None:
    """The detection reads Python's lenient JSON (NaN is a float there), the run reader the strict one."""
    _folder(tmp_path, "[0, NaN]")
    read = explorer_cli("read", "job", cwd=tmp_path)
    assert read.returncode == 2 and RANKS in read.stderr, read.stderr
    check = explorer_cli("check", "job", cwd=tmp_path)
    assert check.returncode == 2 and len(check.stderr.splitlines()) == 1, check.stderr
    assert "'job/spec.json': NaN is not a JSON number" in check.stderr, check.stderr
    assert "--collect" not in check.stderr, "check was given no --collect"


@pytest.mark.parametrize(
    "argv, said",
    [
        (["read", "job"], "'job/spec.json' is not JSON"),
        (["check", "job"], "'job/spec.json' is not JSON"),
        (["run", "--collect", "job"], "--collect 'job/spec.json' is not JSON"),
    ],
    ids=["read", "check", "run-collect"],
)
def test_a_spec_that_is_not_json_names_the_option_only_when_one_was_given(
    explorer_cli, tmp_path, argv, said
) -> None:
    """``read`` and ``check`` take the folder as a plain path: no --collect in their message."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "spec.json").write_text("{")
    (folder / "rank0.jsonl").write_text("")
    out = explorer_cli(*argv, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    assert len(out.stderr.splitlines()) == 1, out.stderr
    assert said in out.stderr, out.stderr
    assert ("--collect" in out.stderr) == ("--collect" in argv), out.stderr


def test_a_stage_to_rank_that_gives_a_rank_no_stage_is_named(explorer_cli, tmp_path) -> None:
    """[1, 1]: every entry a rank below the stages, yet rank 0 runs nothing, which no pipeline
    does; it was read as a job whose every rank was unreadable."""
    _folder(tmp_path, "[1, 1]")
    out = explorer_cli("read", "job", cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert "gives rank 0 no stage" in out.stderr and "job/spec.json" in out.stderr
