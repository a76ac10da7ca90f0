"""``schedule --format csv`` reads back through ``--from``: the explorer's own CSV is told from
PyTorch's by its header, and checks as the schedule that was written (with the P2P model said,
since the CSV does not record it); a hostile row is one line before anything is sized by it."""

from __future__ import annotations

import json

import pytest
from cli_in_process import call_cli

from explorer.pipeline.analysis import build

KINDS = [
    ("1f1b", []),
    ("gpipe", []),
    ("deepspeed-train", []),
    ("deepspeed-inference", []),
    ("zb-h1", []),
    ("dualpipev", []),
    ("interleaved-1f1b", ["--chunks", "2"]),
]
HEADER = "rank,step,slot,stage,instruction,kind,microbatch,buffer\n"


@pytest.mark.parametrize("kind, extra", KINDS, ids=[k for k, _ in KINDS])
def test_the_explorers_csv_checks_as_the_schedule_that_was_written(kind, extra, tmp_path):
    size = ["--stages", "4", "--microbatches", "8", *extra]
    written = tmp_path / "plan.csv"
    made = call_cli(["schedule", "--kind", kind, *size, "--format", "csv", "--out", str(written)])
    assert made.returncode == 0, made.stderr
    chunks = int(extra[1]) if extra else 1
    model = str(build(kind, 4, 8, chunks=chunks).params.get("p2p", "blocking"))
    direct = call_cli(["check", "--kind", kind, *size, "--json"])
    back = call_cli(["check", "--from", str(written), "--model", model, "--json"])
    assert back.returncode == direct.returncode, back.stderr
    a, b = json.loads(direct.stdout), json.loads(back.stdout)
    for key in ("ok", "hazards", "unmatched", "mismatched", "deadlock", "buffers", "bubble"):
        assert a[key] == b[key], key


def test_without_a_model_the_explorers_csv_asks_for_one(tmp_path):
    written = tmp_path / "plan.csv"
    call_cli(
        [
            "schedule",
            "--kind",
            "1f1b",
            "--stages",
            "2",
            "--microbatches",
            "2",
            "--format",
            "csv",
            "--out",
            str(written),
        ]
    )
    called = call_cli(["check", "--from", str(written)])
    assert called.returncode == 2 and len(called.stderr.strip().splitlines()) == 1
    assert "does not record the P2P model" in called.stderr and "--model" in called.stderr


@pytest.mark.parametrize(
    "row, words",
    [
        ("0,99999999,0,0,0F0b0,ForwardPass,0,0", "more than the analyses hold"),
        ("5000,0,0,0,0F0b0,ForwardPass,0,0", "rank 5,000"),
        ("0,0,0,0,99999F0b0,ForwardPass,0,0", "beyond the limits"),
        ("0,0,0,0,0F99999999b0,ForwardPass,0,0", "beyond the limits"),
        ("x,0,0,0,0F0b0,ForwardPass,0,0", "rank 'x' is not an integer"),
        ("0,-1,0,0,0F0b0,ForwardPass,0,0", "step '-1' is not an integer"),
        ("0," + "9" * 5000 + ",0,0,0F0b0,ForwardPass,0,0", "is not an integer"),
        ("0,0,0,0,nonsense,ForwardPass,0,0", "nonsense"),
    ],
    ids=[
        "huge-step",
        "huge-rank",
        "huge-stage",
        "huge-microbatch",
        "rank-text",
        "negative-step",
        "5000-digits",
        "bad-instruction",
    ],
)
def test_a_hostile_row_is_one_line_naming_the_file(row, words, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + row + "\n")
    called = call_cli(["check", "--from", str(bad), "--model", "blocking"])
    lines = called.stderr.strip().splitlines()
    assert called.returncode == 2 and called.stdout == "" and len(lines) == 1, called.stderr
    assert words in lines[0] and "bad.csv" in lines[0] and "Traceback" not in called.stderr
