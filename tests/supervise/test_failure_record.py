"""The one failure record: what every engine writes, and what a run folder read later gives back."""

from __future__ import annotations

import json

from explorer.failure import Failure, FailureKind, from_exception, signal_name, tail
from explorer.pipeline.traces.follow import failure_of


def _raise_in_a_step() -> None:
    def step(i: int) -> None:
        raise ValueError(f"diverged at step {i}")

    step(3)


def test_from_exception_keeps_type_message_place_and_traceback_tail():
    try:
        _raise_in_a_step()
    except ValueError as exc:
        f = from_exception(exc, rank=1, stage=1, step=3, instruction="ForwardPass(buffer_id=0)")
    assert f.kind is FailureKind.ERROR and f.exception_type == "ValueError"
    assert f.message == "ValueError: diverged at step 3"
    assert "in step" in f.traceback_tail and f.traceback_tail.rstrip().endswith(
        "ValueError: diverged at step 3"
    )
    assert f.where() == "rank 1, stage 1, step 3, ForwardPass(buffer_id=0)"


def test_json_round_trip_is_exact_and_kind_is_its_word():
    f = Failure(
        FailureKind.TIMEOUT,
        "stalled: stage 0 (rank 0) waited in RecvGrad(buffer_id=0) at step 4",
        rank=0,
        stage=0,
        step=4,
        instruction="RecvGrad(buffer_id=0)",
        consequences=("rank 1: peer gone",),
        returncode=-9,
        signal="SIGKILL",
    )
    doc = json.loads(json.dumps(f.to_dict()))
    assert doc["kind"] == "timeout" and doc["consequences"] == ["rank 1: peer gone"]
    assert Failure.from_dict(doc) == f
    assert list(doc)[:2] == ["kind", "message"]


def test_a_rank_line_from_before_the_record_said_cause_still_reads():
    """Run folders written before the record named the kind ``cause``: ``run --collect`` reads them."""
    old = {
        "type": "failure",
        "rank": 2,
        "run": "r1",
        "stage": 2,
        "step": 6,
        "instruction": "SendGrad(buffer_id=0)",
        "text": "SendGrad(stage=2)",
        "cause": "buffer",
        "message": "inputs[0].grad is None",
        "time": 1.0,
    }
    f = failure_of(old)
    assert (f.kind, f.rank, f.stage, f.step) == (FailureKind.BUFFER, 2, 2, 6)
    assert f.message == "inputs[0].grad is None"


def test_signal_names_and_tails():
    assert signal_name(-6) == "SIGABRT" and signal_name(1) is None and signal_name(None) is None
    assert tail("\n".join(str(i) for i in range(100)), lines=3) == "97\n98\n99"


def test_a_failure_describes_itself_in_sentences_not_as_a_record():
    try:
        _raise_in_a_step()
    except ValueError as exc:
        f = from_exception(exc, rank=1, stage=1, step=3).at(
            consequences=("rank 0: its neighbour closed the connection",)
        )
    said = f.describe().splitlines()
    assert said[0] == "rank 1, stage 1, step 3: ValueError: diverged at step 3"
    assert said[-2:] == ["consequences:", "  rank 0: its neighbour closed the connection"]
    assert "'message'" not in f.describe() and "\\n" not in f.describe()  # no raw record
    bare = Failure(FailureKind.TIMEOUT, "no progress in 30 s")
    assert bare.describe() == "the run: no progress in 30 s"
