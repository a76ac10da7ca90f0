"""The P2P contract as pure logic: the message field's grammar, the pairing rules, each kind.

The records here are written by hand on purpose: this is the analysis alone. The real runs
that write them are in ``test_pipeline_contract.py`` (and the clean runs of
``test_pipeline_runtime.py``).
"""

from __future__ import annotations

import json

import pytest

from explorer.errors import InputError
from explorer.pipeline.analysis import build
from explorer.pipeline.analysis.contract import check_contract, pairs
from explorer.pipeline.schedules.instructions import Kind
from explorer.pipeline.traces.follow import Follower
from explorer.pipeline.traces.messages import TensorMeta, parse_tensor


def test_the_message_grammar_round_trips_and_counts_elements():
    meta = parse_tensor("int64[8]")
    assert meta == TensorMeta("int64", (8,), False) and meta.numel == 8
    assert parse_tensor("float32[4,8,32]*").requires_grad and parse_tensor("float32[]").numel == 1
    assert parse_tensor("bfloat16[2,3]*").encode() == "bfloat16[2,3]*"
    for bad in ("float32[4,8", "float32", "[4]", "float32[4,x]"):
        with pytest.raises(ValueError):
            parse_tensor(bad)


def _records(schedule, sent=None, received=None, reused=None):
    """One instr line per exchange of iteration 0, each carrying ``float32[4,32]`` unless told
    (activations requiring a gradient, ``*``, gradients not)."""
    out = []
    for r in range(schedule.num_ranks):
        for step, instructions in enumerate(schedule.stream(r)):
            for ins in instructions:
                if not ins.kind.is_p2p:
                    continue
                text = str(ins)
                key = text.split("b")[0]
                forward = ins.kind in (Kind.SEND_ACTIVATION, Kind.RECV_ACTIVATION)
                default = (
                    "float32[4,32]*" if forward else "float32[4,32]"
                )  # "0SA2b1" -> "0SA2": stage, kind, micro-batch
                p2p = (
                    (sent if ins.kind.is_send else received or {}).get(key)
                    if (sent or received)
                    else None
                )
                line = {"iteration": 0, "rank": r, "stage": ins.stage, "step": step,
                        "text": text, "p2p": p2p or [default]}  # fmt: skip
                if reused and key in reused:
                    line["reused"] = reused[key]
                out.append(line)
    return out


def test_matching_tuples_are_clean_and_every_kind_is_named_at_the_receive():
    schedule = build("1f1b", 2, 4)
    assert check_contract(schedule, _records(schedule)) == []
    count = check_contract(
        schedule, _records(schedule, sent={"0SA1": ["float32[4,32]", "int64[8]"]})
    )
    assert count[0].kind == "count" and count[0].microbatch == 1 and count[0].stage == 1
    dtype = check_contract(schedule, _records(schedule, sent={"0SA2": ["int64[8]"]}))
    assert dtype[0].kind == "dtype" and dtype[0].index == 0
    assert "sent int64[8]; the receive buffer is float32[4,32]" in dtype[0].message
    # A floating tensor without a gradient in the forward tuple, a gradient sent back for it.
    grads = check_contract(
        schedule,
        _records(
            schedule,
            sent={
                "0SA1": ["float32[4,32]*", "float32[4,32]"],
                "1SG1": ["float32[4,32]", "float32[4,32]"],
            },
            received={
                "1RA1": ["float32[4,32]*", "float32[4,32]*"],  # the receiver makes both require one
                "0RG1": ["float32[4,32]", "float32[4,32]"],  # a buffer per floating element
            },
        ),
    )
    assert grads[0].kind == "count" and grads[0].stage == 0 and grads[0].microbatch == 1
    assert "sent 2 gradient(s)" in grads[0].message and "with 1 element(s) requiring one" in (
        grads[0].message
    )
    reuse = check_contract(
        schedule,
        _records(schedule, sent={"1SG2": ["int64[8]"]}, reused={"0RG2": [0, 9]}),
    )
    assert reuse[0].kind == "reuse" and reuse[0].reused_from == (0, 9)
    assert "reused from the gradient received at step 9" in reuse[0].message


def test_untagged_pairing_follows_the_rank_pair_and_finds_dualpipev_swaps():
    """DualPipeV on 4 ranks puts stages 0 and 7 on rank 0, 1 and 6 on rank 1: untagged, their
    exchanges share one channel per rank pair, and the orders of the two ranks disagree."""
    schedule = build("dualpipev", 4, 8)
    tagged, peer = pairs(schedule, "tagged"), pairs(schedule, "peer")
    assert len(tagged) == len(peer)
    assert check_contract(schedule, _records(schedule)) == []
    swaps = check_contract(schedule, _records(schedule), "peer")
    assert swaps and {v.kind for v in swaps} == {"swap"}
    first = swaps[0]
    assert schedule.stage_to_rank[first.stage] != schedule.stage_to_rank[first.send_stage]
    # A plain pipeline never shares a channel between directions: nothing to swap.
    plain = build("1f1b", 4, 8)
    assert check_contract(plain, _records(plain), "peer") == []
    assert all(
        schedule.instruction(s).kind in (Kind.SEND_ACTIVATION, Kind.SEND_GRAD) for s, _ in peer
    )


@pytest.mark.parametrize(
    "fields, words",
    [
        ({"p2p": "float32[4]"}, "'p2p' field that is not a list of strings"),
        ({"p2p": ["float32[4"]}, "'p2p' element"),
        ({"p2p": ["float32[4]"], "reused": [0]}, "'reused' field that is not [iteration, step]"),
        ({"reused": [0, 1]}, "'reused' without the 'p2p'"),
    ],
    ids=["not-a-list", "truncated", "bad-reused", "reused-alone"],
)
def test_a_damaged_message_field_is_one_input_error_naming_file_and_line(tmp_path, fields, words):
    start = json.dumps({"type": "start", "rank": 0, "pid": 1, "stages": [0]})
    line = {"type": "instr", "rank": 0, "iteration": 0, "stage": 0, "step": 0, "start": 0.0,
            "end": 1.0, **fields}  # fmt: skip
    (tmp_path / "rank0.jsonl").write_text(f"{start}\n{json.dumps(line)}\n")
    with pytest.raises(InputError) as err:
        Follower(tmp_path).poll()
    assert str(err.value).startswith("rank0.jsonl line 2") and words in str(err.value)
    assert "\n" not in str(err.value)
