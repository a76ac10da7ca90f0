"""The enumerated strings' Literal types and the runtime tables that check input list the same values."""

from __future__ import annotations

from typing import get_args

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis.p2p_models import MODELS, P2PModel, check_model
from explorer.pipeline.schedules.generators import KINDS, ScheduleKind, generate
from explorer.pipeline.schedules.generators.deepspeed import BUFFER_FORMULAS, ORDERS, ExchangeOrder
from explorer.pipeline.schedules.lowering import PLACEMENTS, Placement


def test_every_schedule_kind_is_in_the_literal_and_builds():
    assert tuple(KINDS) == get_args(ScheduleKind)
    for kind in get_args(ScheduleKind):
        assert len(generate(kind, 2, 4)) > 0


def test_the_tables_are_the_literals():
    assert MODELS == get_args(P2PModel) == ("blocking", "batched")
    assert ORDERS == get_args(ExchangeOrder) == BUFFER_FORMULAS == ("legacy", "fixed")
    assert PLACEMENTS == get_args(Placement) == ("consumer", "producer")


def test_a_value_outside_the_literal_is_refused_with_the_choices():
    with pytest.raises(InputError, match="use blocking .* or batched"):
        check_model("async")
    with pytest.raises(InputError, match="unknown order 'newest'"):
        generate("deepspeed-train", 2, 4, order="newest")  # type: ignore[arg-type]
