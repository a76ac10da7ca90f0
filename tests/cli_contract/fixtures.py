"""The folder of bad inputs the tables point at as ``{d}``.

Users' modules, broken configs, run folders, HLO files, a FIFO, sparse files over the size
limits: made once per test session (``conftest.py``) or per sweep (``sweep.py``).
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Optional

from .contract import HLO_DATA
from .user_code import MODULES

GOOD_HLO = (HLO_DATA / "order_a.hlo.txt").read_text()


def _run_folder(
    folder: Path, spec: object, rank0: Optional[str] = None, result: Optional[str] = None
) -> None:
    folder.mkdir()
    if spec is not None:
        (folder / "spec.json").write_text(spec if isinstance(spec, str) else json.dumps(spec))
    if rank0 is not None:
        (folder / "rank0.jsonl").write_text(rank0)
    if result is not None:
        (folder / "result.json").write_text(result)


def _explorer_csv_edited(column: str, value: str) -> str:
    """``schedule --format csv`` of 1F1B on 2 stages, with ``column`` of its last rank-0 backward
    row set to ``value`` (its instruction text left as it was)."""
    import csv
    import io

    from explorer.pipeline.analysis import build
    from explorer.pipeline.schedules.io import to_csv

    rows = list(csv.DictReader(io.StringIO(to_csv(build("1f1b", 2, 2)))))
    row = [r for r in rows if r["rank"] == "0" and r["kind"] == "BackwardPass"][-1]
    row[column] = value
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _valid_spec() -> dict:
    from explorer.pipeline.analysis import build
    from explorer.pipeline.runtime.spec import RunSpec

    return RunSpec.for_schedule(build("1f1b", 2, 2)).to_json()


def _hlo(body: str) -> str:
    return f"HloModule m\n\nENTRY %main (p: f32[]) -> f32[] {{\n{body}\n}}\n"


def make_bad_folder(d: Path) -> Path:
    """Fill ``d`` with the bad inputs every table points at as ``{d}``."""
    for name, source in MODULES.items():
        (d / f"{name}.py").write_text(source)
    (d / "pkg").mkdir()
    (d / "a_file").write_text("not a folder\n")
    (d / "empty_dir").mkdir()
    os.mkfifo(d / "fifo")
    # JSON documents that are not configs
    for name, text in {
        "list.json": "[1, 2]",
        "string.json": '"compile"',
        "number.json": "3",
        "null.json": "null",
        "notjson.json": "{compile: yes}",
        "empty.json": "",
        "nan.json": '{"compile": {"kwargs": NaN}}',
        "inf.json": '{"x": Infinity}',
        "bigint.json": '{"x": ' + "9" * 5000 + "}",
        "deep.json": "[" * 100_000 + "]" * 100_000,
        "deep100.json": "[" * 100 + "]" * 100,
        "deep_obj.json": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "section_list.json": '{"compile": [1]}',
        "unknown_key.json": '{"compile": {"enable": true}}',
        "backend_num.json": '{"compile": {"backend": 5}}',
        "backend_missing.json": '{"compile": {"backend": "no_such_pkg_xyz.fn"}}',
        "kwargs_list.json": '{"compile": {"kwargs": [1]}}',
        "kwargs_bad.json": '{"compile": {"kwargs": {"fullgraph": true, "bogus": 1}}}',
        "enabled_str.json": '{"compile": {"enabled": "yes"}}',
        "mode_options.json": '{"compile": {"kwargs": {"mode": "x", "options": {}}}}',
    }.items():
        (d / name).write_text(text)
    (d / "latin1.json").write_bytes('{"compile": {"backend": "caf\u00e9"}}'.encode("latin-1"))
    (d / "bom16.json").write_bytes('{"compile": {}}'.encode("utf-16"))
    with open(d / "huge.json", "wb") as fh:  # sparse: no disk used, refused by size before reading
        fh.truncate(600 * 2**20)
    with open(d / "huge.hlo", "wb") as fh:
        fh.truncate(600 * 2**20)
    # PyTorch schedule CSVs for --from FILE.csv: numbers past the --stages/--microbatches limits
    for name, text in {
        "mb_beyond_int64.csv": "0F99999999999999999999\n",
        "mb_10_million.csv": "0F10000000\n",
        "mb_5000_digits.csv": "0F" + "9" * 5000 + "\n",
        "stage_10_million.csv": "10000000F0\n",
        "comms_stage_10_million.csv": "0F0,0SEND_F0\n,10000000RECV_F0\n",
        "cells_over_limit.csv": "0F65535\n1023F0\n",
        "stages_missing.csv": "0F0\n1000F0\n",
        "order.csv": "0F0,0B0\n",  # a good one, for options that must not come with it
    }.items():
        (d / name).write_text(text)
    # The explorer's own CSV with a column that repeats the instruction edited: it was ignored
    for column, value in (("microbatch", "5"), ("kind", "ForwardPass"), ("stage", "1")):
        (d / f"explorer_{column}_edited.csv").write_text(_explorer_csv_edited(column, value))
    # HLO files
    hlo = {
        "good.hlo": GOOD_HLO,
        "two.hlo": GOOD_HLO + "\n" + GOOD_HLO.replace("SyncTensorsGraph.17", "Other.1", 1),
        "empty.hlo": "",
        "not_hlo.hlo": "hello world\nthis is not HLO\n",
        "nul.hlo": "HloModule m\x00\x00\x00\n",
        "only_header.hlo": "HloModule m\n",
        # the second module's header garbled: its computations were skipped as text between
        # modules, and hlo-diff of the file's two modules said "Same"
        "garbled_header.hlo": GOOD_HLO + "\n" + GOOD_HLO.replace("HloModule", "HloModul", 1),
        "truncated.hlo": GOOD_HLO[: len(GOOD_HLO) // 2],
        "param_digits.hlo": _hlo("  ROOT %p = f32[] parameter(" + "9" * 5000 + ")"),
        "param_big.hlo": _hlo("  ROOT %p = f32[] parameter(99999999999999999999)"),
        "param_negative.hlo": _hlo("  ROOT %p = f32[] parameter(-1)"),
        "param_float.hlo": _hlo("  ROOT %p = f32[] parameter(1.5)"),
        "param_twice.hlo": _hlo("  %p = f32[] parameter(0)\n  ROOT %q = f32[] parameter(0)"),
        # parameters 0 and 2: the diff paired parameters by numbers XLA never writes
        "param_gap.hlo": _hlo("  %p = f32[] parameter(0)\n  ROOT %q = f32[] parameter(2)"),
        "source_line_digits.hlo": _hlo(
            '  %p = f32[] parameter(0)\n  ROOT %n = f32[] negate(%p), metadata={op_type="aten__neg" '
            'source_file="x.py" source_line=' + "7" * 5000 + "}"
        ),
        "spaces_header.hlo": "HloModule m\n\nENTRY %main" + " " * 60_000 + "x\n",
        "spaces_header2.hlo": "HloModule m\n\n%c (x: f32[]) "
        + " " * 60_000
        + "-> f32[] x {\n  ROOT %x = f32[] parameter(0)\n}\n",
        "comments_operands.hlo": _hlo(
            "  %p = f32[] parameter(0)\n  ROOT %a = f32[] add(" + "/* " * 40_000 + "%p, %p)"
        ),
        "parens.hlo": _hlo("  ROOT %a = f32[] add(" + "(" * 100_000 + ")"),
        "long_line.hlo": _hlo("  ROOT %a = f32[] add(%p, " + "%q" * 500_000 + ")"),
        "spaces_attr.hlo": _hlo(
            "  %p = f32[] parameter(0)\n  ROOT %a = f32[] negate(%p), foo=a" + " " * 60_000 + "{"
        ),
        "missing_operand.hlo": _hlo("  ROOT %a = f32[] negate(%nothere)"),
        "cycle.hlo": _hlo("  %a = f32[] negate(%b)\n  ROOT %b = f32[] negate(%a)"),
        "two_roots.hlo": _hlo(
            "  %p = f32[] parameter(0)\n  ROOT %a = f32[] negate(%p)\n  ROOT %b = f32[] negate(%p)"
        ),
        "two_entries.hlo": _hlo("  ROOT %p = f32[] parameter(0)")
        + "ENTRY %again () -> f32[] {\n  ROOT %c = f32[] constant(1)\n}\n",
        "unknown_callee.hlo": _hlo(
            "  %p = f32[] parameter(0)\n  ROOT %r = f32[] call(%p), to_apply=%nowhere"
        ),
        "dup_instr.hlo": _hlo("  %p = f32[] parameter(0)\n  ROOT %p = f32[] negate(%p)"),
        "no_equals.hlo": _hlo("  ROOT %p f32[] parameter(0)"),
        "bad_shape.hlo": _hlo("  ROOT %p = f99 parameter(0)"),
        "unclosed.hlo": "HloModule m\n\nENTRY %main () -> f32[] {\n  ROOT %c = f32[] constant(1)\n",
        "long_operand.hlo": _hlo("  ROOT %a = f32[] negate(%" + "n" * 5000 + ")"),
        "text_after_brace.hlo": _hlo("  ROOT %c = f32[] constant(1)").replace("}\n", "} garbage\n"),
    }
    for name, text in hlo.items():
        (d / name).write_text(text)
    (d / "latin1.hlo").write_bytes(
        GOOD_HLO.replace("SyncTensorsGraph", "Graph\u00e9").encode("latin-1")
    )
    (d / "binary.hlo").write_bytes(bytes(range(256)) * 40)
    (d / "corrupt.hlo.gz").write_bytes(gzip.compress(GOOD_HLO.encode())[:12] + b"\xff" * 64)
    (d / "truncated.hlo.gz").write_bytes(gzip.compress(GOOD_HLO.encode())[:-20])
    (d / "plain.hlo.gz").write_text(GOOD_HLO)  # named .gz but not gzip
    (d / "binary.hlo.gz").write_bytes(gzip.compress(bytes(range(256)) * 40))
    # run folders for `run --collect`
    spec = _valid_spec()
    _run_folder(d / "run_garbage", "}{ not json")
    _run_folder(d / "run_empty", "")
    _run_folder(d / "run_list", [1, 2, 3])
    _run_folder(d / "run_string", '"spec"')
    _run_folder(d / "run_types", {**spec, "microbatch_size": "four"})
    _run_folder(d / "run_unknown_key", {**spec, "surprise": 1})
    _run_folder(d / "run_no_schedule", {k: v for k, v in spec.items() if k != "schedule"})
    _run_folder(
        d / "run_bad_schedule",
        {**spec, "schedule": {"format": "explorer.schedule/1", "streams": 5}},
    )
    _run_folder(d / "run_schedule_list", {**spec, "schedule": [1]})
    _run_folder(
        d / "run_bad_instr",
        {**spec, "schedule": {**spec["schedule"], "streams": [[["0F" + "9" * 5000]]]}},
    )
    _run_folder(
        d / "run_big_stage",
        {**spec, "schedule": {**spec["schedule"], "stage_to_rank": [0, 10**30]}},
    )
    _run_folder(d / "run_model_type", {**spec, "model": "mlp"})
    _run_folder(d / "run_nan_timeout", json.dumps(spec)[:-1] + ', "stall_timeout_s": NaN}')
    _run_folder(d / "run_deep", "[" * 100_000 + "]" * 100_000)
    _run_folder(d / "run_latin1", None)
    (d / "run_latin1" / "spec.json").write_bytes(
        json.dumps({**spec, "seed": 0}).replace('"gloo"', '"gl\u00f6o"').encode("latin-1")
    )
    _run_folder(d / "run_rank_garbage", spec, rank0="this is not json\n")
    _run_folder(d / "run_rank_list", spec, rank0="[1, 2]\n")
    _run_folder(d / "run_rank_norank", spec, rank0='{"type": "instr"}\n')
    _run_folder(d / "run_rank_badrank", spec, rank0='{"type": "start", "rank": "zero"}\n')
    _run_folder(d / "run_rank_latin1", spec, rank0=None)
    (d / "run_rank_latin1" / "rank0.jsonl").write_bytes(
        '{"type": "start", "rank": 0, "x": "\u00e9"}\n'.encode("latin-1")
    )
    _run_folder(d / "run_result_garbage", spec, rank0="", result="not json")
    _run_folder(d / "run_result_list", spec, rank0="", result="[1]")
    _run_folder(d / "run_spec_dir", None)
    (d / "run_spec_dir" / "spec.json").mkdir()
    _run_folder(d / "run_spec_fifo", None)
    os.mkfifo(d / "run_spec_fifo" / "spec.json")
    return d
