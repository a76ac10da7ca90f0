"""Pure parts of reading XLA artifacts: durations, sync sites, step splitting, file kinds."""

from __future__ import annotations

from explorer.xla.analysis.from_artifacts import _split, sync_site
from explorer.xla.traces.artifacts import kind_of_file
from explorer.xla.traces.debuglog import DebugEvent
from explorer.xla.traces.metrics_report import duration_ms, parse_metrics_report

LOOP = ["sync (/x/site-packages/torch_xla/torch_xla.py:87)", "train (/u/train.py:40)"]
SETUP = ["sync (/x/site-packages/torch_xla/torch_xla.py:87)", "setup (/u/train.py:12)"]


def test_durations_read_as_torch_xla_prints_them():
    assert duration_ms("01m02s345ms678.000us") == 62345.678
    assert duration_ms("013ms105.219us") == 13.105219
    assert duration_ms("143.00") is None


def test_counters_and_metrics_are_read():
    text = "Metric: CompileTime\n  TotalSamples: 3\n  Accumulator: 02s500ms\nCounter: UncachedCompile\n  Value: 3\n"
    report = parse_metrics_report(text)
    assert report.counters == {"UncachedCompile": 3}
    assert report.total_ms("CompileTime") == 2500.0 and report.samples("CompileTime") == 3


def test_counts_and_times_no_torch_xla_report_holds_are_refused():
    """A negative or 29-digit counter, or 10^27 seconds of compile time, were printed as
    ``-5 compile(s)`` and a 31-digit CompileTime: a report torch_xla did not write."""
    import pytest

    from explorer.errors import InputError

    for value in ("-5", "9" * 29):
        with pytest.raises(InputError, match="not a count torch_xla writes"):
            parse_metrics_report(f"Counter: UncachedCompile\n  Value: {value}\n")
    with pytest.raises(InputError, match="more than any run takes"):
        duration_ms("999999999999999999999999999s")
    assert duration_ms("100h") == 3.6e8  # a long run is still a run


def test_the_sync_site_skips_torch_xla_frames():
    assert sync_site(LOOP) == "train (/u/train.py:40)"


def test_steps_are_the_syncs_from_the_loop_line_and_setup_is_before_them():
    ev = [
        DebugEvent("compile", "user torch_xla.sync", "a", frames=SETUP),
        DebugEvent("execute", "user torch_xla.sync", "a", frames=SETUP),
        DebugEvent("compile", "user torch_xla.sync", "b", frames=LOOP),
        DebugEvent("execute", "user torch_xla.sync", "b", frames=LOOP),
        DebugEvent("execute", "user torch_xla.sync", "b", frames=LOOP),
        DebugEvent("execute", "user torch_xla.sync", "b", frames=LOOP),
        DebugEvent("execute", "user torch_xla.sync", "a", frames=SETUP),
    ]
    site, setup, steps, trailing = _split(ev)
    assert site == "train (/u/train.py:40)"
    assert [e.graph_hash for e in setup] == ["a", "a"]
    assert [[e.kind for e in s] for s in steps] == [
        ["compile", "execute"],
        ["execute"],
        ["execute"],
    ]
    assert trailing == 1  # an evaluation after the loop, from another line


def test_files_are_recognised_by_content_not_name(tmp_path):
    (tmp_path / "a.txt").write_text("Metric: CompileTime\n  TotalSamples: 1\n")
    (tmp_path / "b.txt").write_text("\nCompilation Analysis: ====\n")
    (tmp_path / "c.txt").write_text("[ScheduleSyncTensorsGraph]\nTensorsGraphInfo:\n")
    (tmp_path / "module_0003.SyncTensorsGraph.9.before_optimizations.txt").write_text("x")
    (tmp_path / "module_0003.SyncTensorsGraph.9.cpu_after_optimizations.txt").write_text("x")
    kinds = {p.name: kind_of_file(str(p)) for p in tmp_path.iterdir()}
    assert kinds == {
        "a.txt": "metrics",
        "b.txt": "debug",
        "c.txt": "save",
        "module_0003.SyncTensorsGraph.9.before_optimizations.txt": "dump",
        "module_0003.SyncTensorsGraph.9.cpu_after_optimizations.txt": None,
    }
