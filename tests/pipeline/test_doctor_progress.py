"""What counts as a live job moving while the doctor watches its rank files.

A stack is one moment, so the doctor confirms a wait it sees by watching the ranks' files for
``CONFIRM_S``: a job that writes is moving. A waiting rank whose stall timeout fires writes
only its failure line, and that once turned a real hang into "moving". The lines here are
written by the ranks' own :class:`Recorder`, as a live rank writes them.
"""

from __future__ import annotations

import time

import pytest

from explorer.failure import Failure, FailureKind
from explorer.pipeline.runtime import doctor as doctor_module
from explorer.pipeline.runtime.recorder import Recorder
from explorer.pipeline.schedules.instructions import parse_instruction


@pytest.fixture
def recorder(tmp_path, monkeypatch):
    monkeypatch.setattr(doctor_module, "CONFIRM_S", 0.3)
    rec = Recorder(tmp_path, 0, run_id="r1")
    rec.start([0], time.monotonic_ns())
    yield rec
    rec.close()


def _sizes(folder):
    return doctor_module._log_sizes(folder, [0])


def test_a_failure_line_alone_is_not_progress(tmp_path, recorder):
    before = _sizes(tmp_path)
    recorder.failure(Failure(FailureKind.TIMEOUT, "no message from stage 1 in 3 s"))
    assert _sizes(tmp_path) != before  # the file grew ...
    assert not doctor_module._moved(tmp_path, before, time.monotonic())  # ... yet nothing moved


def test_an_instruction_line_is_progress_even_beside_a_failure(tmp_path, recorder):
    before = _sizes(tmp_path)
    recorder.failure(Failure(FailureKind.TIMEOUT, "no message from stage 1 in 3 s"))
    now = time.monotonic_ns()
    recorder.add(0, 3, parse_instruction("0F1b1"), now, now + 1000)
    recorder.flush()
    assert doctor_module._moved(tmp_path, before, time.monotonic())


def test_a_file_that_stands_still_has_not_moved_and_one_rewritten_has(tmp_path, recorder):
    before = _sizes(tmp_path)
    assert not doctor_module._moved(tmp_path, before, time.monotonic())
    (tmp_path / "rank0.jsonl").write_text("")  # a new run in the folder: it shrank
    assert doctor_module._moved(tmp_path, before, time.monotonic())
