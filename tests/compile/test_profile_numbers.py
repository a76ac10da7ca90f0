"""A profiler trace beside a TORCH_TRACE log with numbers too large for a float is read, not a traceback.

JSON integers have no size limit. The compile reader takes ``1e400`` as infinity and reads on;
an integer of 401 digits is the same number to a user and must be read the same way, where
``float()`` raises OverflowError.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from explorer.compile.traces.profile import read_compile_profile

LINE = (
    "V1124 09:59:29.548000 7965 torch/_dynamo/convert_frame.py:249] "
    '{"dynamo_start": {"stack": []}, "frame_id": 0}\n'
)
HUGE = "9" * 401


def _profile(path: Path, base: str, ts: str, dur: str) -> Path:
    path.write_text(
        f'{{"baseTimeNanoseconds": {base}, "traceEvents": [{{"ph": "X", "name": "ProfilerStep#0", '
        f'"pid": 7965, "ts": {ts}, "dur": {dur}}}]}}'
    )
    return path


@pytest.mark.parametrize(
    "base, ts, dur",
    [(HUGE, "1", "1"), ("1", HUGE, "1"), ("1", "1", HUGE)],
    ids=["base", "ts", "dur"],
)
def test_an_integer_too_large_for_a_float_is_read_as_infinity(tmp_path, base, ts, dur) -> None:
    (found,) = read_compile_profile(_profile(tmp_path / "w.pt.trace.json", base, ts, dur))
    (step,) = found.steps
    assert math.isinf(step.start_us) or math.isinf(step.dur_us)


def test_read_on_a_trace_folder_with_such_a_profile_gives_a_report(explorer_cli, tmp_path) -> None:
    (tmp_path / "dedicated_log_torch_trace_rank_0_ab.log").write_text(LINE)
    _profile(tmp_path / "w.pt.trace.json", HUGE, HUGE, "1")
    out = explorer_cli("read", str(tmp_path))
    assert out.returncode in (0, 1) and "records from Dynamo TORCH_TRACE" in out.stdout, out.stderr
