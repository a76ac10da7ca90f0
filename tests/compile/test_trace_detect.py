"""The torch-trace detector claims TORCH_TRACE folders and files, and nothing that is another kind.

Detection looks at names and a few kilobytes only. Run folders (``spec.json``), XLA dumps and
folders of profiler traces alone belong to other readers; a file that merely carries the
name but not the glog-and-JSON lines is not claimed either.
"""

from __future__ import annotations

import json
from pathlib import Path

from explorer.compile.traces.detect import MAX_ENTRIES, recognise, trace_files
from explorer.errors import InputError
from explorer.read import detect

LINE = 'V1124 09:59:29.548000 7965 torch/_dynamo/convert_frame.py:249] {"dynamo_start": {"stack": []}, "frame_id": 0}\n'


def test_a_trace_folder_two_levels_down_is_found(tmp_path: Path) -> None:
    deep = tmp_path / "job" / "torch_trace"
    deep.mkdir(parents=True)
    (deep / "dedicated_log_torch_trace_rank_0_ab12.log").write_text(LINE)
    assert detect(tmp_path).kind == "torch-trace"
    assert "1 structured-trace file" in recognise(tmp_path)
    assert detect(deep / "dedicated_log_torch_trace_rank_0_ab12.log").kind == "torch-trace"


def test_other_kinds_are_not_claimed(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text("{}")
    (run / "rank0.jsonl").write_text("")
    (run / "dedicated_log_torch_trace_x.log").write_text(LINE)
    assert detect(run).kind == "pipeline-run", "a run folder is tried first"
    xla = tmp_path / "xla"
    xla.mkdir()
    (xla / "module_0001.SyncTensorsGraph.1.before_optimizations.txt").write_text("HloModule m\n")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "host_1.pt.trace.json").write_text(
        json.dumps({"schemaVersion": 1, "traceEvents": []})
    )
    named = tmp_path / "named"
    named.mkdir()
    (named / "dedicated_log_torch_trace_x.log").write_bytes(b"\x00\x01PK binary, not a trace")
    for folder in (xla, profiles, named):
        assert recognise(folder) is None, folder
        try:
            assert detect(folder).kind != "torch-trace"  # another reader may claim it ...
        except InputError:
            pass  # ... or none does


def test_the_search_is_bounded(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"f{i}.txt").write_text("")
    (tmp_path / "zz").mkdir()
    (tmp_path / "zz" / "dedicated_log_torch_trace_x.log").write_text(LINE)
    assert len(trace_files(tmp_path)) == 1
    assert MAX_ENTRIES >= 10_000
