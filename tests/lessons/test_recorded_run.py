"""The lesson's recorded torch.compile run still says what a fresh recording says.

The lesson build reads a run recorded once and kept gzipped (recording needs torch and seconds
to minutes; the build stays deterministic and fast). Here the same job is recorded again with
the real ``torch.compile`` (``explorer.compile.record_example_job``, in child processes) and
read by the compile product's reader: the iterations that recompiled, the guard that failed
first, the iteration where the recompile limit was hit and the diagnosis must be the ones the
lesson's questions are marked with. Timings differ between runs and are not compared.
"""

from __future__ import annotations

import pytest

from explorer.lessons.build import lesson_data
from explorer.lessons.recorded import read_recorded, recompiles
from explorer.lessons.source import read_lesson


def _answers(result) -> dict:
    found = recompiles(result)
    limit = [c for c in result.compiles if c.failed == "RecompileLimitExceeded"]
    return {
        "recompiled": [c.iteration for c in found],
        "first_guard": found[0].guard,
        "limit_hit": [c.iteration for c in limit],
        "eager": [it.iteration for it in result.iterations if it.fallback],
        "cause": result.diagnosis.cause,
    }


@pytest.mark.slow  # torch.compile in a child process
def test_a_fresh_recording_gives_the_lesson_its_answers(tmp_path):
    pytest.importorskip("torch")
    from explorer.compile import read_job, record_example_job

    fresh = read_job(record_example_job("limit", tmp_path / "run"))
    kept = read_recorded("compile-limit")
    assert _answers(fresh) == _answers(kept)
    assert _answers(kept) == {
        "recompiled": [1, 2],
        "first_guard": "self.mode == 0",
        "limit_hit": [8],
        "eager": [8, 9, 10, 11],
        "cause": "eager-fallback",
    }
    lesson = lesson_data(
        read_lesson(next(p for p in _lessons() if "compile" in p.stem)), figures=False
    )
    marked = {
        b["ask"]: [o["label"] for o in b["options"] if o["right"]]
        for b in lesson["blocks"]
        if b["type"] == "question"
    }
    assert marked == {
        "first-recompile": ["iteration 1"],
        "recompile-guard": ["self.mode == 0"],
        "limit-hit": ["iteration 8"],
    }


def _lessons():
    from explorer.lessons.build import lesson_sources

    return lesson_sources()
