"""``explorer read`` on broken or mixed TORCH_TRACE folders: exit 2, one line naming the constraint, no traceback.

The trace that the mixed and broken folders are made of is written in the test by a real
compiled loop (:mod:`explorer.compile.runtime.example_job`); each case then copies, renames, cuts or
corrupts it the way a real folder goes wrong.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from built_once import built_once

from explorer.compile.runtime.example_job import record
from tests.cli_contract.contract import Case, assert_bad_input

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The bad folders, recorded once per test run (both xdist workers read the same ones)."""
    return built_once(
        tmp_path_factory, "compile-bad-trace-folders", lambda: _bad_folders(tmp_path_factory)
    )


def _bad_folders(tmp_path_factory) -> Path:
    job = record("cycling", tmp_path_factory.mktemp("job"), iterations=3)
    trace = next((job / "torch_trace").iterdir())
    profile = next((job / "profiler").iterdir())
    d = tmp_path_factory.mktemp("bad")
    for name, files in {
        "same_rank": {
            "dedicated_log_torch_trace_rank_0_a.log": trace,
            "dedicated_log_torch_trace_rank_0_b.log": trace,
        },
        "no_rank": {
            "dedicated_log_torch_trace_a.log": trace,
            "dedicated_log_torch_trace_b.log": trace,
        },
        "cut_profile": {"dedicated_log_torch_trace_a.log": trace},
        "latin1_profile": {"dedicated_log_torch_trace_a.log": trace},
    }.items():
        (d / name).mkdir()
        for target, source in files.items():
            shutil.copy(source, d / name / target)
    text = profile.read_text()
    (d / "cut_profile" / "worker.pt.trace.json").write_text(text[: len(text) // 2])
    (d / "latin1_profile" / "worker.pt.trace.json").write_bytes(
        text[:200].encode() + b"\xe9\xff" + text[200:].encode()
    )
    (d / "no_records").mkdir()
    (d / "no_records" / "dedicated_log_torch_trace_x.log").write_text(
        "".join(
            line.split("] ", 1)[0] + "] {not json\n" for line in trace.read_text().splitlines()[:5]
        )
    )
    (d / "empty").mkdir()
    (d / "empty" / "dedicated_log_torch_trace_x.log").write_text("")
    return d


CASES = [
    Case("two-traces-for-one-rank", ["read", "{d}/same_rank"], "two runs in one folder"),
    Case("two-traces-without-rank", ["read", "{d}/no_rank", "--json"], "names no rank"),
    Case("profiler-trace-cut-short", ["read", "{d}/cut_profile"], "is not JSON"),
    Case("profiler-trace-not-utf8", ["read", "{d}/latin1_profile"], "not UTF-8"),
    Case("glog-lines-without-json", ["read", "{d}/no_records"], "holds no structured-trace record"),
    Case(
        "empty-trace-file",
        ["read", "{d}/empty/dedicated_log_torch_trace_x.log"],
        "holds no structured-trace record",
    ),
    Case("missing-path", ["read", "{d}/nothing_here"], "does not exist"),
]


@pytest.mark.parametrize("case", [c.param() for c in CASES])
def test_bad_trace_folders_are_one_line_and_exit_two(case: Case, folder: Path) -> None:
    assert_bad_input(case, folder)
