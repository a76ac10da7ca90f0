"""A real run folder (``tests/shared_runs.py``) with one thing edited: every command refuses it
in one line (exit 2) instead of a verdict about no run. Before, a line of a stage the schedule
does not have was dropped without a word ("every message matches" over half the exchanges), a
deleted send passed as "7 lines, every message matches", ``1e999`` in result.json gave "ok"
and a ``--json`` document no JSON reader takes, and a stray rank file of such lines was a
traceback from ``read``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Callable

import pytest
from cli_in_process import asked_four_ways, call_cli

pytestmark = pytest.mark.slow  # reads the shared real run (one `explorer run` per test run)


def _lines(folder: Path, rank: int) -> list[dict]:
    return [json.loads(x) for x in (folder / f"rank{rank}.jsonl").read_text().splitlines()]


def _write(folder: Path, rank: int, lines: list[dict]) -> None:
    (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def _instr(lines: list[dict], kind_letters: str = "") -> int:
    """The index of the first instruction line (whose text has ``kind_letters``, when given)."""
    return next(
        i for i, x in enumerate(lines) if x["type"] == "instr" and kind_letters in x["text"]
    )


def _edit_rank(rank: int, change: Callable[[list[dict]], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        lines = _lines(folder, rank)
        change(lines)
        _write(folder, rank, lines)

    return edit


def _set(rank: int, field: str, value: object, kind: str = "") -> Callable[[Path], None]:
    return _edit_rank(rank, lambda ls: ls[_instr(ls, kind)].update({field: value}))


def _result(change: Callable[[dict], None]) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        doc = json.loads((folder / "result.json").read_text())
        change(doc)
        (folder / "result.json").write_text(json.dumps(doc))

    return edit


def _first_loss_typed_as(text: str) -> Callable[[Path], None]:
    """The first loss written as ``text`` (``json.dumps`` cannot write ``1e999``)."""

    def edit(folder: Path) -> None:
        path = folder / "result.json"
        old = path.read_text()
        first = json.dumps(json.loads(old)["losses"][0])
        assert first in old
        path.write_text(old.replace(first, text, 1))

    return edit


EDITS: dict[str, tuple[Callable[[Path], None], str]] = {
    "stage-beyond": (_set(1, "stage", 5), "names stage 5; spec.json's schedule has stages 0 to 1"),
    "stage-of-another-rank": (
        _set(1, "stage", 0),
        "names stage 0, which spec.json's schedule runs on rank 0",
    ),
    "rank-of-another-file": (_set(1, "rank", 0), "says rank 0, in rank 1's file"),
    "step-not-in-stream": (
        _set(0, "step", 999),
        "is no instruction of rank 0's stream at step 999",
    ),
    "wrong-microbatch": (_set(0, "microbatch", 3, "F0"), "says micro-batch 3 where its row runs 0"),
    "send-deleted": (
        _edit_rank(0, lambda ls: ls.pop(_instr(ls, "SA"))),
        "wrote its end but has no line for 0SA0",
    ),
    "send-twice": (
        _edit_rank(0, lambda ls: ls.insert(_instr(ls, "SA"), ls[_instr(ls, "SA")])),
        "2 times, though each instruction runs once",
    ),
    "iterations-claimed": (
        lambda f: (f / "spec.json").write_text(
            json.dumps({**json.loads((f / "spec.json").read_text()), "iterations": 3})
        ),
        "wrote its end after 1 timed iteration(s) of instruction lines; spec.json's run times 3",
    ),
    "copy-of-rank-1": (
        lambda f: shutil.copy(f / "rank1.jsonl", f / "rank5.jsonl"),
        "says rank 1, in rank 5's file",
    ),
    "loss-1e999": (_first_loss_typed_as("1e999"), "has losses.0 beyond a float"),
    "losses-unlike-reference": (
        _result(lambda d: d["losses"].__setitem__(0, 0.5)),
        "contradicts itself: it says bitwise equal to the reference, but its losses differ",
    ),
    "ok-false": (_result(lambda d: d.update(ok=False)), "ok: true and a true or false"),
    "bitwise-a-string": (
        _result(lambda d: d.update(bitwise_equal_to_reference="yes")),
        "ok: true and a true or false",
    ),
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_edited_run_folder_is_refused_in_one_line_by_every_command(cli_1f1b_run, tmp_path, case):
    folder = Path(shutil.copytree(cli_1f1b_run.folder, tmp_path / "run"))
    edit, words = EDITS[case]
    edit(folder)
    said = asked_four_ways(folder)
    for name, c in said.items():
        assert c.returncode == 2 and len(c.stderr.splitlines()) == 1, (name, c.stderr, c.stdout)
        assert words in c.stderr and "Traceback" not in c.stderr, (name, c.stderr)


def test_the_untouched_run_and_its_stray_rank_file_copy(cli_1f1b_run, tmp_path):
    """The run as it was is clean; a rank file beyond its ranks holding lines of a stage the
    schedule lacks (rank 1's lines renumbered 2) made ``read`` raise an IndexError."""
    folder = Path(shutil.copytree(cli_1f1b_run.folder, tmp_path / "run"))
    assert call_cli(["check", str(folder)]).returncode == 0
    assert call_cli(["read", str(folder)]).returncode == 0
    lines = _lines(folder, 1)
    for x in lines:
        x.update({k: 2 for k in ("rank", "stage") if k in x})
    _write(folder, 2, lines)
    said = call_cli(["read", str(folder)])
    assert said.returncode == 2 and "Traceback" not in said.stderr, said.stderr
    assert (
        "rank 2's lines name stage 2, which the schedule in spec.json does not have" in said.stderr
    )
