"""Round trips: instruction text, schedule text/JSON/CSV."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.errors import InputError
from explorer.pipeline.analysis import build
from explorer.pipeline.schedules import Instruction, Kind, io, parse_instruction
from tests.schedules.strategies import schedule_args


@given(st.integers(0, 500), st.sampled_from(list(Kind)), st.integers(0, 5000), st.integers(-1, 64))
def test_instruction_text_round_trip(stage, kind, mb, buf):
    ins = Instruction(
        stage=stage, kind=kind, microbatch=mb if kind.has_microbatch else -1, buffer=buf
    )
    assert parse_instruction(str(ins)) == ins


@pytest.mark.parametrize("text", ["", "F0", "2X0", "2F", "2Ob1x", "2O3", "2RAb"])
def test_bad_instruction_text_names_the_form(text):
    with pytest.raises(InputError, match="instruction"):
        parse_instruction(text)


@settings(max_examples=40, deadline=None)
@given(schedule_args(max_stages=5, max_microbatches=10))
def test_schedule_round_trips_through_text_json_and_csv(args):
    kind, p, m, v = args
    s = build(kind, p, m, chunks=v)
    assert io.from_text(io.to_text(s)).same_instructions(s)
    back = io.from_json(io.to_json(s))
    assert back.same_instructions(s) and dict(back.params) == dict(s.params)
    csv_back = io.from_csv(io.to_csv(s))
    assert csv_back.num_stages == s.num_stages and len(csv_back) == len(s)
    assert [str(i) for r in range(s.num_ranks) for step in csv_back.stream(r) for i in step] == [
        str(i) for r in range(s.num_ranks) for step in s.stream(r) for i in step
    ]


def test_malformed_schedule_text_says_what_is_wrong():
    with pytest.raises(InputError, match="expected 'rank R step T"):
        io.from_text("# name=x stages=1 microbatches=1 steps=1 stage_to_rank=0 buffers=1\nfoo\n")
    with pytest.raises(InputError, match="format"):
        io.from_json({"streams": []})
