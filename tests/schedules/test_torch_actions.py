"""PyTorch's action vocabulary: one parse and one format, round-tripped, and agreeing with PyTorch's own."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.cli_options import MAX_MICROBATCHES, MAX_STAGES
from explorer.errors import InputError
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.schedules.torch_actions import (
    KIND_BY_TYPE,
    ActionType,
    TorchAction,
    format_action,
    parse_action,
    to_action,
)

singles = st.builds(
    TorchAction,
    st.integers(0, MAX_STAGES - 1),
    st.sampled_from([t for t in ActionType if t is not ActionType.OVERLAP_F_B]),
    st.one_of(st.none(), st.integers(0, MAX_MICROBATCHES - 1)),
    st.none(),
)


@given(singles)
def test_single_actions_round_trip(action: TorchAction) -> None:
    text = format_action(action)
    assert parse_action(text) == action
    assert str(action) == text


@given(st.lists(singles, min_size=1, max_size=3))
def test_overlapped_pairs_round_trip(parts: list[TorchAction]) -> None:
    pair = TorchAction(-1, ActionType.OVERLAP_F_B, None, tuple(parts))
    text = format_action(pair)
    assert text.startswith("(") and text.endswith(")OVERLAP_F_B")
    assert parse_action(text) == pair
    assert pair.parts == tuple(parts)


@pytest.mark.parametrize(
    ("text", "stage", "kind", "mb"),
    [
        ("2F0", 2, Kind.FORWARD, 0),
        ("1SEND_F3", 1, Kind.SEND_ACTIVATION, 3),
        ("0RECV_B12", 0, Kind.RECV_GRAD, 12),
        ("3W7", 3, Kind.BACKWARD_WEIGHT, 7),
        (" 0B1 ", 0, Kind.BACKWARD, 1),
    ],
)
def test_kinds(text: str, stage: int, kind: Kind, mb: int) -> None:
    action = parse_action(text)
    assert action is not None
    assert (action.stage, action.kind, action.microbatch) == (stage, kind, mb)
    assert TorchAction.of(stage, kind, mb) == action


def test_unshard_has_no_microbatch_and_no_kind() -> None:
    action = parse_action("0UNSHARD")
    assert action == TorchAction(0, ActionType.UNSHARD, None)
    assert action.kind is None and not action.type.is_compute


def test_empty_cell_is_idle() -> None:
    assert parse_action("") is None and parse_action("  ") is None and to_action(None) is None


@pytest.mark.parametrize("bad", ["2F0x", "F0", "2X0", "2f0", "-1F0", "(0F1;1B0)", "2SEND0"])
def test_a_whole_string_must_match(bad: str) -> None:
    with pytest.raises(InputError, match="cannot read pipelining action"):
        parse_action(bad)


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("0F65536", "limit of 65,536 micro-batches"),
        ("0F99999999999999999999", "limit of 65,536 micro-batches"),
        ("0F" + "9" * 5000, "limit of 65,536 micro-batches"),  # past what int() reads
        ("1024F0", "limit of 1,024 stages"),
        ("9" * 5000 + "SEND_F0", "limit of 1,024 stages"),
        ("(0F1;1024B0)OVERLAP_F_B", "limit of 1,024 stages"),
    ],
)
def test_numbers_past_the_option_limits_are_refused(text: str, limit: str) -> None:
    with pytest.raises(InputError, match=limit):
        parse_action(text)


def test_the_limits_themselves_are_read() -> None:
    assert parse_action("1023F65535") == TorchAction(1023, ActionType.FORWARD, 65535)
    assert parse_action("0000000000000000000001F0").stage == 1  # leading zeros are no size


class _PyTorchAction:
    """Shaped like PyTorch's ``_Action``: what ``to_action`` reads from a live order."""

    def __init__(self, stage: int, microbatch: int) -> None:
        self.stage_index, self.computation_type, self.microbatch_index = stage, "F", microbatch


def test_actions_made_in_code_are_held_to_the_same_limits() -> None:
    with pytest.raises(InputError, match="limit of 1,024 stages"):
        to_action(_PyTorchAction(10**8, 0))
    with pytest.raises(InputError, match="limit of 65,536 micro-batches"):
        to_action(TorchAction(0, ActionType.FORWARD, 10**7))
    assert to_action(_PyTorchAction(3, 2)) == TorchAction(3, ActionType.FORWARD, 2)


def test_every_explorer_kind_with_a_counterpart_maps_back() -> None:
    for t, kind in KIND_BY_TYPE.items():
        assert TorchAction.of(4, kind, 2).type is t
    with pytest.raises(InputError, match="LOAD has no torch.distributed.pipelining action"):
        TorchAction.of(0, Kind.LOAD, 0)


@pytest.mark.slow
def test_agrees_with_pytorchs_own_action() -> None:
    """Every text our format writes, PyTorch's ``_Action.from_str`` reads back to the same text, and vice versa."""
    from torch.distributed.pipelining.schedules import _Action

    texts = ["2F0", "1SEND_F3", "0RECV_B1", "3I4", "3W4", "0B2", "1UNSHARD", "1RESHARD"]
    texts.append("(0F1;1B0)OVERLAP_F_B")
    for text in texts:
        theirs = _Action.from_str(text)
        assert str(theirs) == text
        ours = to_action(theirs)
        assert format_action(ours) == text == format_action(parse_action(text))


@pytest.mark.parametrize("counts", [{"num_stages": 1}, {"num_stages": 1, "num_microbatches": 2}])
def test_a_stage_count_below_the_orders_own_stages_is_refused(counts) -> None:
    """A stage beyond the count given fell off the tables (an IndexError). A micro-batch beyond
    its count is a finding, not bad input: PyTorch 2.9's own 1F1B order numbers one ahead."""
    from explorer.pipeline.schedules.adapters import from_torch_pipelining

    order = {0: ["0F0", "0F1", "0B0", "0B1"], 1: ["1F0", "1F1", "1B0", "1B1"]}
    with pytest.raises(InputError, match="names stage 1, beyond the num_stages=1 given"):
        from_torch_pipelining(order, **counts)
    assert from_torch_pipelining(order, num_stages=2, num_microbatches=2).num_stages == 2
