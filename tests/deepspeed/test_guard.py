"""The version guard and the engine's limits: one line naming what is missing (pure logic, no DeepSpeed)."""

from __future__ import annotations

import types

import pytest

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime.deepspeed.guard import (
    INSTRUCTIONS,
    UnsupportedDeepSpeed,
    check,
    missing,
)
from explorer.pipeline.runtime.deepspeed.schedules import unrunnable

SCHEDULE = types.SimpleNamespace(PipeSchedule=type("PipeSchedule", (), {}))


def _engine(table: bool = True, hook: bool = True, names=INSTRUCTIONS) -> type:
    attrs: dict = {}
    if table:
        attrs["_INSTRUCTION_MAP"] = {type(n, (), {}): (lambda self: None) for n in names}
    if hook:
        attrs["_train_schedule"] = lambda self: None
    return type("PipelineEngine", (), attrs)


def test_a_release_with_the_seams_passes():
    assert missing(_engine(), SCHEDULE) == []
    check("0.19.8", _engine(), SCHEDULE)


def test_an_older_release_without_the_schedule_hook_is_named_with_its_version():
    with pytest.raises(UnsupportedDeepSpeed) as info:
        check("0.9.0", _engine(hook=False), SCHEDULE)
    text = str(info.value)
    assert "DeepSpeed 0.9.0 is not supported" in text and "_train_schedule()" in text
    assert "\n" not in text


def test_a_dispatch_table_without_an_instruction_says_which():
    gaps = missing(_engine(names=[n for n in INSTRUCTIONS if n != "SendGrad"]), SCHEDULE)
    assert gaps == ["dispatch entries for SendGrad"]
    assert "PipelineEngine._INSTRUCTION_MAP" in missing(_engine(table=False), SCHEDULE)[0]


def test_schedules_deepspeeds_engine_cannot_run_are_refused_with_the_reason():
    assert unrunnable(build("deepspeed-train", 4, 8)) is None
    assert unrunnable(build("1f1b", 4, 8)) is None
    assert "one stage per rank" in unrunnable(build("interleaved-1f1b", 4, 8, chunks=2))
    assert "BackwardInput" in unrunnable(build("zb-h1", 4, 8))
