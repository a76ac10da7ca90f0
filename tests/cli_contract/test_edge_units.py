"""The pieces of the validation layer, one by one, in process (fast): what the tables rely on."""

from __future__ import annotations

import math
import os
import re

import pytest

from explorer.errors import InputError, excerpt, one_line
from explorer.inputs import loads_json, read_text, write_text
from explorer.loading import import_user_module
from explorer.pipeline.analysis import Costs, check
from explorer.pipeline.analysis.rules import apply_rules, parse_rules
from explorer.pipeline.analysis.sizes import check_group
from explorer.pipeline.schedules import io
from explorer.pipeline.schedules.adapters import from_deepspeed, load_class
from explorer.pipeline.schedules.schedule import NO_COMPUTE
from explorer.pipeline.schedules.torch_csv import read_torch_csv, schedule_from_order


class LoadMicroBatch:
    def __init__(self, buffer_id):
        self.buffer_id = buffer_id


class ForwardPass(LoadMicroBatch):
    pass


class NoLoad:
    """One stage that runs a forward without loading: it reads inputs[0] and labels[0] unwritten."""

    def __init__(self, micro_batches, stages, stage_id):
        pass

    def steps(self):
        yield [ForwardPass(0)]

    def num_pipe_buffers(self):
        return 1


def test_a_labels_read_is_spelled_labels():
    causes = [h.cause for h in check(from_deepspeed(NoLoad, 1, 1)).findings.hazards]
    assert any("labels[0]" in c for c in causes), causes
    assert not any("labelss" in c for c in causes)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, 1e400, 10**400, 2e12, -1])
def test_costs_refuse_non_finite_negative_and_huge(value):
    with pytest.raises(InputError):
        Costs(forward=value)


def test_costs_at_the_limit_keep_a_finite_bubble():
    report = check(
        from_deepspeed(NoLoad, 1, 1).replace(), Costs(forward=Costs.MAX, backward=Costs.MAX)
    )
    assert report.timeline is None or math.isfinite(report.timeline.bubble.makespan)


@pytest.mark.parametrize(
    "value, buffers",
    [
        (-1, "between 1 and"),
        ("2", "whole number"),
        (2.0, "whole number"),
        (float("nan"), "whole number"),
        (10**30, "between 1 and"),
    ],
)
def test_num_pipe_buffers_must_be_a_positive_whole_number(value, buffers):
    cls = type("Odd", (NoLoad,), {"num_pipe_buffers": lambda self: value})
    with pytest.raises(InputError, match=buffers):
        from_deepspeed(cls, 1, 1)


def test_a_class_that_exits_is_an_input_error_in_process_too():
    def steps(self):
        raise SystemExit(3)
        yield []

    with pytest.raises(InputError, match="SystemExit"):
        from_deepspeed(type("Exits", (NoLoad,), {"steps": steps}), 1, 1)


_COMPUTES_NOTHING = """
class _Base:
    def __init__(self, micro_batches, stages, stage_id):
        pass
    def num_pipe_buffers(self):
        return 1
class YieldsNothing(_Base):
    def steps(self):
        yield []
class NoSteps(_Base):
    def steps(self):
        return iter(())
"""


@pytest.mark.parametrize("name", ["YieldsNothing", "NoSteps"])
def test_a_class_that_computes_nothing_is_refused_as_such_a_csv_is(name, tmp_path, monkeypatch):
    """Not an IndexError from the timeline: the single check (schedule, check, fix's reference
    size) and a sweep's sizes, rules applied or not, refuse it in the CSV path's words."""
    (tmp_path / "computes_nothing.py").write_text(_COMPUTES_NOTHING)
    monkeypatch.syspath_prepend(str(tmp_path))
    cls = load_class(f"computes_nothing:{name}")
    refusal = re.escape(NO_COMPUTE)
    with pytest.raises(InputError, match=refusal):
        schedule_from_order(read_torch_csv("0UNSHARD\n"))
    with pytest.raises(InputError, match=refusal):
        check(from_deepspeed(cls, 2, 2))
    with pytest.raises(InputError, match=refusal):
        check(apply_rules(from_deepspeed(cls, 2, 2), parse_rules(["grads-first", "buffers+1"])))
    with pytest.raises(InputError, match=refusal):
        check_group(lambda p, m: from_deepspeed(cls, p, m), [(2, 1), (2, 2)])


def test_excerpt_and_one_line_keep_messages_short():
    assert len(excerpt("9" * 5000)) < 120 and "5,000 characters" in excerpt("9" * 5000)
    assert excerpt("short") == "'short'"
    line = one_line("a\nb\n" + "x" * 100_000)
    assert "\n" not in line and len(line) <= 600


def test_import_user_module_turns_every_failure_into_one_input_error(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    for name, text, words in [
        ("m_syntax", "def (:\n", "syntax error"),
        ("m_raise", "1/0\n", "ZeroDivisionError"),
        ("m_exit", "raise SystemExit(2)\n", "SystemExit"),
        ("m_kbd", "raise KeyboardInterrupt\n", "KeyboardInterrupt"),
    ]:
        (tmp_path / f"{name}.py").write_text(text)
        with pytest.raises(InputError, match=words):
            import_user_module(name, "--from")
    with pytest.raises(InputError, match="not a module name"):
        import_user_module("", "--from")


@pytest.mark.parametrize(
    "doc, words",
    [
        ([], "JSON object"),
        ({"format": "explorer.schedule/1"}, "lacks 'streams'"),
        ({"format": "explorer.schedule/1", "streams": [[["0F" + "9" * 60]]]}, "longer than 40"),
        ({"format": "explorer.schedule/1", "streams": [[[5]]]}, "instructions are text"),
        (
            {
                "format": "explorer.schedule/1",
                "streams": [[["0F0b0"]]],
                "num_microbatches": 1,
                "stage_to_rank": [0],
                "buffers": [10**30],
            },
            "integers 0..",
        ),
        (
            {
                "format": "explorer.schedule/1",
                "streams": [[["3F0b0"]]],
                "num_microbatches": 1,
                "stage_to_rank": [0],
                "buffers": [1],
            },
            "not on rank 0",
        ),
    ],
)
def test_schedule_json_is_checked_field_by_field(doc, words):
    with pytest.raises(InputError, match=words):
        io.from_json(doc)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 100_000, "levels deep"),
        ("[" * 80 + "]" * 80, "levels deep"),
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "Infinity"),
        ("{", "not JSON"),
    ],
)
def test_strict_json(text, words):
    with pytest.raises(InputError, match=words):
        loads_json(text, "x")


def test_a_fifo_is_refused_for_reading_and_for_writing_without_a_reader(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="FIFO"):
        read_text(str(fifo), "--config")
    with pytest.raises(InputError, match="no process reads"):
        write_text(str(fifo), "x", "--out")


def test_a_fifo_with_a_reader_is_written(tmp_path):
    """The reader's end is open before the write (a non-blocking open returns at once), so
    no thread has to win a race to open it first."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_text(str(fifo), "hello", "--out")
        got = os.read(reader, 100)
    finally:
        os.close(reader)
    assert got == b"hello"


def test_an_xla_timeout_blames_collectives_only_with_several_devices():
    from explorer.xla.runtime.launch import _ending

    one = _ending([{"event": "begin", "step": 0}], -9, "", True, 5.0, several_devices=False)
    many = _ending([{"event": "begin", "step": 0}], -9, "", True, 5.0, several_devices=True)
    assert "collectives" not in one.message and "did not finish" in one.message
    assert "collectives across several CPU devices" in many.message


def test_an_xla_timeout_says_the_step_the_child_had_begun_or_its_setup():
    from explorer.xla.runtime.launch import _ending

    began = [
        {"event": "begin", "step": 0},
        {"event": "step", "step": 0},
        {"event": "begin", "step": 1},
    ]
    in_step = _ending(began, -9, "", True, 15.0)
    in_setup = _ending([{"event": "device"}], -9, "", True, 15.0)
    between = _ending(began[:2], -9, "", True, 15.0)
    assert in_step.step == 1 and "no result after 15 s (stopped during step 1;" in in_step.message
    assert in_setup.step is None and "(stopped during setup;" in in_setup.message
    assert between.step is None and in_step.kind == in_setup.kind == between.kind == "timeout"


@pytest.mark.slow
def test_a_reader_that_left_never_turns_a_verdict_into_exit_0():
    """``explorer hlo-diff A B | head`` once exited 0 (read as "identical") for two different
    graphs: a closed stdout is exit 141, as a program SIGPIPE ends; never a traceback."""
    import os
    import subprocess
    import sys

    from .contract import ROOT

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte: the write fails for certain
    data = ROOT / "tests" / "data" / "hlo"
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "hlo-diff", str(data / "added_save.hlo.txt"),
         str(data / "scalar_save.hlo.txt"), "--module", "0"],
        stdout=write, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    os.close(write)
    assert done.returncode == 141 and "Traceback" not in done.stderr, done.stderr[-2000:]
