"""``explorer hlo-diff`` / ``hlo-list`` as a user runs them: exit codes, JSON keys, no tracebacks.

Tests that take ``explorer_cli`` run in-process (fast tier) and in a child (slow tier).
"""

from __future__ import annotations

import json
import os

import pytest

from explorer.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_diff_json_has_the_issue_keys(explorer_cli, data_dir):
    r = explorer_cli(
        "hlo-diff", f"{data_dir}/order_a.hlo.txt", f"{data_dir}/order_b.hlo.txt", "--json", cwd=ROOT
    )
    assert r.returncode == 1, r.stderr  # a difference is a finding
    out = json.loads(r.stdout)
    assert {
        "summary",
        "parameter_permutation",
        "added",
        "removed",
        "changed",
        "matched_count",
    } <= set(out)
    assert sorted(out["parameter_permutation"]) == [[0, 2], [1, 3], [2, 0], [3, 1]]
    assert out["matched_count"] == 12
    assert out["identical"] is False  # the exit code's verdict, in the document as well
    assert out["ok"] is False and list(out)[0] == "ok"  # as in every command's document
    same = explorer_cli(
        "hlo-diff", f"{data_dir}/order_a.hlo.txt", f"{data_dir}/order_a.hlo.txt", "--json", cwd=ROOT
    )
    assert same.returncode == 0 and json.loads(same.stdout)["identical"] is True
    assert json.loads(same.stdout)["ok"] is True


def test_same_module_twice_exits_0(data_dir, capsys):
    code = main(["hlo-diff", f"{data_dir}/added_save.hlo.txt", "--module", "0", "--module", "2"])
    assert code == 0
    assert "Same computation" in capsys.readouterr().out


def test_one_file_two_modules_with_html(data_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    code = main(
        [
            "hlo-diff",
            f"{data_dir}/added_save.hlo.txt",
            "--module",
            "IrToHlo.91",
            "--module",
            "3",
            "--html",
            str(out),
        ]
    )
    assert code == 1
    text = out.read_text()
    assert "<html>" in text and "aten__stack" in text and "plotly" in text
    assert "added in IrToHlo.141" in capsys.readouterr().out


def test_list_json(explorer_cli, data_dir):
    r = explorer_cli("hlo-list", f"{data_dir}/added_save.hlo.txt", "--json", cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["instructions"] for x in rows] == [77, 78, 77, 108]  # the entry computations
    assert [x["all_instructions"] for x in rows] == [86, 87, 86, 132]  # with the called ones
    assert rows[0]["fingerprint"] == rows[2]["fingerprint"] != rows[1]["fingerprint"]
    assert rows[0]["group"] == rows[1]["group"]


@pytest.mark.parametrize(
    "files, modules",
    [
        (["added_save.hlo.txt"], ["0", "3"]),  # the careful reader (--module)
        (["encoder_step1.hlo.txt.gz", "encoder_step2.hlo.txt.gz"], []),  # the one-module fast path
        (["order_a.hlo.txt", "order_a.after_opt.hlo.txt"], []),
    ],
)
def test_list_and_diff_count_one_module_alike(explorer_cli, data_dir, files, modules):
    """Two ways of asking a module's instruction count give one answer."""
    paths = [f"{data_dir}/{f}" for f in files]
    args = [x for m in modules for x in ("--module", m)]
    diff = explorer_cli("hlo-diff", *paths, *args, "--json", cwd=ROOT)
    assert diff.returncode in (0, 1), diff.stderr
    counts = json.loads(diff.stdout)["instructions"]
    listed = []
    for path in dict.fromkeys(paths):
        r = explorer_cli("hlo-list", path, "--json", cwd=ROOT)
        assert r.returncode == 0, r.stderr
        listed.append(json.loads(r.stdout))
    if modules:
        sides = [listed[0][int(m)] for m in modules]
    else:
        sides = [rows[0] for rows in listed]
    assert [row["instructions"] for row in sides] == counts
    assert all(row["all_instructions"] >= row["instructions"] for row in sides)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["hlo-diff", "nope.hlo", "nope2.hlo"], "no such file"),
        (["hlo-diff", "{d}/make_fixtures.py", "{d}/order_a.hlo.txt"], "no 'HloModule' line"),
        (["hlo-diff", "{d}/added_save.hlo.txt", "{d}/order_a.hlo.txt"], "choose one with --module"),
        (["hlo-diff", "{d}/added_save.hlo.txt", "--module", "9", "--module", "0"], "out of range"),
        (
            ["hlo-diff", "{d}/added_save.hlo.txt", "--module", "nope", "--module", "0"],
            "no module named",
        ),
        (["hlo-diff", "{d}/order_a.hlo.txt"], "needs two files"),
        (["hlo-list", "{d}"], "is a directory"),
    ],
)
def test_bad_input_exits_2_without_traceback(explorer_cli, data_dir, args, needle):
    r = explorer_cli(*[a.format(d=data_dir) for a in args], cwd=ROOT)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_truncated_file_exits_2_naming_the_line(explorer_cli, data_dir, tmp_path):
    text = open(f"{data_dir}/order_a.hlo.txt").read()
    bad = tmp_path / "cut.hlo"
    bad.write_text(text[: text.index("%reduce.15") + 20])
    r = explorer_cli("hlo-list", str(bad), cwd=ROOT)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    line = text[: text.index("%reduce.15")].count("\n") + 1
    assert f"cut.hlo:{line}:" in r.stderr and "%reduce.15" in r.stderr


def test_a_byte_order_mark_is_read_past(data_dir, tmp_path):
    """An editor that saves "with BOM" put U+FEFF before ``HloModule``: the refusal said the file
    held no HloModule line. The text reads as the same module."""
    from cli_in_process import call_cli

    plain = f"{data_dir}/order_a.hlo.txt"
    marked = tmp_path / "bom.hlo.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + open(plain, "rb").read())
    same = call_cli(["hlo-diff", str(marked), plain, "--json"])
    assert same.returncode == 0 and json.loads(same.stdout)["identical"] is True, same.stderr
    assert call_cli(["hlo-list", str(marked)]).returncode == 0


def test_a_groups_other_opcodes_are_counted_not_elided():
    """ "605 multiply, ...." (an ellipsis before the full stop) said neither how many nor what."""
    from explorer.xla.hlo.records import InstructionGroup
    from explorer.xla.hlo.summary import _group_phrase

    ops = (("constant", 5), ("parameter", 4), ("multiply", 3), ("add", 2), ("tanh", 1))
    group = InstructionGroup("added", "", "", "", 15, ops, (), ())
    assert _group_phrase(group) == "5 constant, 4 parameter, 3 multiply and 3 of 2 other opcodes"
    one = InstructionGroup("added", "", "", "", 10, ops[:4], (), ())
    assert _group_phrase(one).endswith("3 multiply and 2 of 1 other opcode")


def test_a_module_cut_before_its_entry_is_refused_not_read_as_its_last_callee(tmp_path, capsys):
    """Cut just before ``ENTRY``, a module's last computation is a small callee (a reducer):
    it was taken for the entry, and hlo-diff reported "the parameter count changed from 64 to
    2" of a file that holds no entry at all. Cut inside the entry it was already refused."""
    whole = os.path.join(ROOT, "tests", "data", "hlo", "order_a.hlo.txt")
    with open(whole, encoding="utf-8") as fh:
        text = fh.read()
    cut = tmp_path / "cut.hlo.txt"
    cut.write_text(text[: text.index("\nENTRY") + 1])
    assert "ENTRY" not in cut.read_text() and "{" in cut.read_text()
    for argv in (["hlo-list", str(cut)], ["hlo-diff", whole, str(cut)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "no ENTRY computation" in err and err.count("\n") == 1
