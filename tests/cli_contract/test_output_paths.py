"""An output folder or file that cannot be made is bad input, for every command that writes one.

``explorer run --out /proc/x`` and ``explorer xla-run --out /proc/x`` printed a
``FileNotFoundError`` traceback and exited 1: ``/proc`` looks writable to root, but ``mkdir``
there fails. Each command that writes a folder (``--out``) or a file (``--trace``, ``--html``,
``schedule --out``) now refuses, at parse time, a path that cannot be created: one line that
names the path and says what to change, exit 2, no traceback, nothing started.

The table runs in-process for every command and path; one case per command also runs as a
child process (the slow tier), which is what proves the real exit and the absence of a traceback.
"""

from __future__ import annotations

import os
import re

import pytest

from explorer.errors import excerpt

from .contract import HLO_DATA, Case, assert_bad_input, assert_bad_input_in_process

SIZE = ["--kind", "1f1b", "--stages", "2", "--microbatches", "4"]

#: Each command that writes an output folder, as argv before the folder.
FOLDER_COMMANDS = {
    "run": ["run", *SIZE, "--out"],
    "run-deepspeed": ["run", *SIZE, "--engine", "deepspeed", "--out"],
    "run-torch": ["run", *SIZE, "--engine", "torch", "--out"],
    "run-all": ["run", *SIZE, "--engine", "all", "--out"],
    "xla-run": ["xla-run", "--scenario", "steady", "--out"],
    "lesson-build": ["lesson", "build", "--out"],
}

#: Each command that writes an output file, as argv before the file.
FILE_COMMANDS = {
    "run-trace": ["run", *SIZE, "--trace"],
    "run-deepspeed-trace": ["run", *SIZE, "--engine", "deepspeed", "--trace"],
    "run-all-html": ["run", *SIZE, "--engine", "all", "--html"],
    "schedule-out": ["schedule", *SIZE, "--out"],
    "hlo-diff-html": [
        "hlo-diff",
        str(HLO_DATA / "order_a.hlo.txt"),
        str(HLO_DATA / "order_b.hlo.txt"),
        "--html",
    ],
    "read-html": ["read", "{d}", "--html"],
}

#: Folders that cannot be made, and the words the refusal must say.
BAD_FOLDERS = {
    "under-proc": ("/proc/explorer_out_xyz", "cannot be created"),
    "under-sys": ("/sys/explorer_out_xyz", "cannot be created"),  # read-only, root or not
    "sys-itself": ("/sys", "cannot hold a new file"),
    "under-a-file": ("{d}/a_file/run", "is a file, so the folder cannot be created"),
    "a-file": ("{d}/a_file", "is a file, not a folder"),
}

#: Files that cannot be written, and the words the refusal must say.
BAD_FILES = {
    "under-proc": ("/proc/explorer_out_xyz.json", "cannot be written"),
    "under-sys": ("/sys/explorer_out_xyz.json", "cannot be written"),
    "under-a-file": ("{d}/a_file/out.json", "is a file, not a directory"),
    "a-folder": ("{d}", "is a directory"),
}


def _cases() -> list[Case]:
    cases = []
    for command, head in FOLDER_COMMANDS.items():
        for where, (path, needle) in BAD_FOLDERS.items():
            cases.append(Case(f"{command}-{where}", [*head, path], needle))
    for command, head in FILE_COMMANDS.items():
        for where, (path, needle) in BAD_FILES.items():
            cases.append(Case(f"{command}-{where}", [*head, path], needle))
    return cases


CASES = _cases()
#: One child process per command: the first path of each (under /proc, the case first met).
ONE_PER_COMMAND = [c for c in CASES if c.id.endswith("-under-proc")]


@pytest.mark.parametrize("case", [c.param() for c in CASES])
def test_an_output_that_cannot_be_made_is_refused_in_one_line(case: Case, bad) -> None:
    ran = assert_bad_input_in_process(case, bad)
    path = next(a for a in case.argv[::-1] if a.startswith(("/", "{d}"))).replace("{d}", str(bad))
    # Named as every message quotes what the user gave: a long path is cut (``excerpt``), and
    # pytest's temporary folders grow longer as its run counter does.
    assert excerpt(path) in ran.stderr or path in ran.stderr, "the line names the path"
    assert re.search(r"[:;] (give|create it first)", ran.stderr), "it says what to change"


@pytest.mark.slow
@pytest.mark.parametrize("case", [c.param() for c in ONE_PER_COMMAND])
def test_an_output_that_cannot_be_made_is_refused_through_the_cli(case: Case, bad) -> None:
    assert_bad_input(case, bad)


def test_the_check_leaves_nothing_behind(bad, tmp_path) -> None:
    """The check creates the missing folders to prove it can, then removes them again."""
    from explorer.inputs import check_output_dir, check_output_file

    check_output_dir(str(tmp_path / "a" / "b" / "c"), "--out")
    check_output_file(str(tmp_path / "trace.json"), "--trace")
    assert os.listdir(tmp_path) == []
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "old.txt").write_text("old")
    check_output_dir(str(tmp_path / "kept"), "--out")
    check_output_file(str(tmp_path / "kept" / "old.txt"), "--trace")
    assert sorted(os.listdir(tmp_path / "kept")) == ["old.txt"]
    assert (tmp_path / "kept" / "old.txt").read_text() == "old"


def test_every_command_that_writes_is_in_the_table() -> None:
    """A new output option must join the table: every ``--out``/``--trace``/``--html`` the
    parser knows is one of the commands above."""
    from explorer.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    writers = set()
    # a command's own actions, and those of its actions' sub-commands (``lesson build``)
    commands = [(name, command) for name, command in sub.choices.items()]
    commands += [
        (name, nested)
        for name, command in sub.choices.items()
        for a in command._actions
        if a.__class__.__name__ == "_SubParsersAction"
        for nested in a.choices.values()
    ]
    for name, command in commands:
        for action in command._actions:
            if set(action.option_strings) & {"--out", "--trace", "--html"}:
                writers.add((name, action.option_strings[0]))
                assert action.type is not None, f"{name} {action.option_strings[0]} is unchecked"
    table = {(head[0], head[-1]) for head in [*FOLDER_COMMANDS.values(), *FILE_COMMANDS.values()]}
    assert writers == table


#: Commands whose output file may be named as one of their inputs: argv with ``{in}`` for the
#: input file, which the test writes and then names as the output too.
INPUT_AS_OUTPUT = {
    "hlo-diff-html": ["hlo-diff", "{in}", str(HLO_DATA / "order_b.hlo.txt"), "--html", "{in}"],
    "schedule-csv-out": ["schedule", "--from", "{in}", "--out", "{in}", "--format", "csv"],
    "schedule-csv-out-by-another-name": ["schedule", "--from", "{in}", "--out", "{again}"],
}


@pytest.mark.parametrize("name", sorted(INPUT_AS_OUTPUT))
def test_an_output_that_is_one_of_the_inputs_is_refused_and_left_as_it_was(
    name: str, bad, tmp_path
) -> None:
    """Writing the report over an input would replace what was read: refused before any work."""
    source = HLO_DATA / "order_a.hlo.txt" if name.startswith("hlo") else None
    given = tmp_path / ("a.hlo.txt" if source else "plan.csv")
    given.write_bytes(source.read_bytes() if source else b"0F0,0F1\n")
    before = given.read_bytes()
    again = str(tmp_path / "." / given.name)  # the same file, spelled another way
    argv = [a.replace("{in}", str(given)).replace("{again}", again) for a in INPUT_AS_OUTPUT[name]]
    ran = assert_bad_input_in_process(Case(name, argv, "is also an input"), bad)
    assert "give another file" in ran.stderr
    assert given.read_bytes() == before, "the input was not touched"


def test_an_output_beside_its_input_is_written(tmp_path) -> None:
    from cli_in_process import call_cli

    plan = tmp_path / "plan.csv"
    plan.write_text("0F0,0F1\n")
    out = tmp_path / "plan.out.csv"
    called = call_cli(["schedule", "--from", str(plan), "--out", str(out), "--format", "csv"])
    assert called.returncode == 0, called.stderr
    assert out.read_text().startswith("rank,step") and plan.read_text() == "0F0,0F1\n"
