"""The compiled loops (``_kernels.c``) give the numpy versions' answers, bit for bit.

The timeline's step walk and the buffer check each have a numpy version (their oracle, and the
fallback where no C compiler is); here every schedule kind, both P2P models, random costs and
random buffer counts (hazards included) go through both, and bad arguments to the C side are
refused with a ValueError, never a stray read.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import explorer.pipeline.analysis.timeline as timeline
from explorer.pipeline.analysis import Costs, buffer_hazards, build, find_deadlock, kernels, match
from explorer.pipeline.analysis import buffers as buffers_module
from explorer.pipeline.analysis.buffers import needed_buffers, with_buffers
from tests.schedules.strategies import schedule_args

PROPERTY = settings(max_examples=80, deadline=None)


def test_the_kernels_are_built_by_the_install():
    """``make test`` installs with a C compiler: the fast path is what the suite checks."""
    assert kernels.compiled() is not None


def _timelines(schedule, costs, model):
    """The simulated timeline through the compiled rows-and-walk and through numpy's, and how
    many steps held waits inside them (so a test can say the rounds were exercised)."""
    matching = match(schedule)
    seen: dict[str, int] = {}
    numpy_walk = timeline.walk_numpy

    def counting_walk(grid, earlier, inner, bounds):
        seen["inner"] = int((bounds[1:] > bounds[:-1]).sum())
        return numpy_walk(grid, earlier, inner, bounds)

    compiled = timeline.simulate(schedule, matching, costs, model)
    timeline.walk_numpy = counting_walk
    try:
        with kernels.disabled():
            reference = timeline.simulate(schedule, matching, costs, model)
    finally:
        timeline.walk_numpy = numpy_walk
    return compiled, reference, seen.get("inner")


@PROPERTY
@given(
    schedule_args(),
    st.sampled_from(["blocking", "batched"]),
    st.floats(0.1, 3),
    st.floats(0.1, 3),
    st.floats(0, 0.5),
    st.floats(0, 0.3),
)
def test_the_compiled_walk_gives_numpys_floats(args, model, f, b, lat, send):
    kind, p, m, v = args
    schedule = build(kind, p, m, chunks=v)
    if find_deadlock(schedule, match(schedule), model) is not None:
        return
    costs = Costs(forward=f, backward=b, backward_input=b / 2, backward_weight=b / 2, p2p=lat)
    compiled, reference, _ = _timelines(schedule, costs.with_rank(0, send=send), model)
    assert compiled.start.tobytes() == reference.start.tobytes()
    assert compiled.end.tobytes() == reference.end.tobytes()


@pytest.mark.parametrize("kind", ["deepspeed-train", "deepspeed-inference"])
def test_steps_with_waits_inside_them_take_the_rounds_and_agree(kind):
    """DeepSpeed's schedules hold a send and its receive in one step: the rounds path."""
    schedule = build(kind, 4, 8)
    compiled, reference, inner = _timelines(schedule, Costs(p2p=0.3, send=0.1), "batched")
    assert inner and inner > 0
    assert compiled.start.tobytes() == reference.start.tobytes()


@PROPERTY
@given(schedule_args(max_stages=6, max_microbatches=12), st.data())
def test_the_compiled_buffer_check_gives_numpys_verdict(args, data):
    """Random buffer counts per stage make hazards (too few buffers) as well as clean cases."""
    kind, p, m, v = args
    schedule = build(kind, p, m, chunks=v)
    n = schedule.num_stages
    counts = data.draw(st.lists(st.integers(1, 4), min_size=n, max_size=n))
    schedule = with_buffers(schedule, counts)
    hazards, needed = buffer_hazards(schedule), needed_buffers(schedule)
    with kernels.disabled():
        assert buffer_hazards(schedule) == hazards
        # a fresh schedule object: needed buffers are cached per micro-batch column
        again = schedule.replace(microbatch=schedule.microbatch.copy())
        assert needed_buffers(again) == needed


def test_the_buffer_check_sees_the_seeds_hazard_in_both_versions():
    """The seed's DeepSpeed schedule with one buffer fewer overwrites a gradient."""
    schedule = with_buffers(build("deepspeed-train", 4, 8), [1, 1, 1, 1])
    assert buffer_hazards(schedule)
    with kernels.disabled():
        assert buffer_hazards(schedule)


def _rows():
    """Two ranks, two steps: rank 0 sends in step 0, rank 1 receives it in step 1; as the
    compiled simulation takes them (rank, step, order, exchange, partner, cost, start, end)."""
    return [
        np.array([0, 0, 1, 1], dtype=np.int64),
        np.array([0, 0, 0, 1], dtype=np.int64),
        np.arange(4, dtype=np.int64),
        np.array([0, 1, 0, 2], dtype=np.uint8),
        np.array([-1, 3, -1, 1], dtype=np.int64),
        np.array([1.0, 0.5, 1.0, 0.25]),
        np.empty(4),
        np.empty(4),
    ]


def _simulate_rows(rows, blocking=False, identity=True, ranks=2, steps=2):
    module = kernels.compiled()
    assert module is not None
    module.per_step(*rows, 0.125, blocking, identity, ranks, steps)
    return rows[6], rows[7]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda a: a[0].__setitem__(0, 5), "rank or step is outside"),
        (lambda a: a[1].__setitem__(3, 2), "rank or step is outside"),
        (lambda a: a[4].__setitem__(3, 10**9), "no partner"),
        (lambda a: a[4].__setitem__(3, -1), "no partner"),
        (lambda a: a[1].__setitem__(1, 1) or a[1].__setitem__(3, 0), "later step"),
        (lambda a: a.__setitem__(2, np.array([0, 0, 2, 3], dtype=np.int64)), "permutation"),
        (lambda a: a.__setitem__(2, np.array([2, 1, 0, 3], dtype=np.int64)), "out of its"),
        (lambda a: a[0].__setitem__(slice(None), [0, 1, 0, 1]), "share a cell"),
        (lambda a: a.__setitem__(5, np.zeros(3)), "rows, not"),
        (lambda a: a.__setitem__(0, a[0].astype(np.float64)), "format"),
    ],
)
def test_the_compiled_simulation_refuses_rows_that_would_read_astray(edit, said):
    rows = _rows()
    start, end = _simulate_rows(rows)  # the unedited rows are simulated
    # rank 0: send at 1, ends 1.5; rank 1: compute 0-1, the receive waits for 1.5 + 0.125
    assert start.tolist() == [0.0, 1.0, 0.0, 1.625] and end[3] == 1.875
    rows = _rows()
    edit(rows)
    with pytest.raises(ValueError, match=said):
        _simulate_rows(rows, identity=False)


def test_the_compiled_needed_buffers_refuse_events_outside_their_sizes():
    module = kernels.compiled()
    assert module is not None
    stage = np.array([0, 1, 0], dtype=np.int64)
    mb = np.array([0, 0, 1], dtype=np.int64)
    peaks = np.zeros(2, dtype=np.int64)
    module.needed(stage, mb, peaks, 2, 2)
    assert peaks.tolist() == [1, 1]  # micro-batch 0 ends on stage 0 before 1 begins
    module.needed(np.array([0, 0, 0], dtype=np.int64), np.array([0, 1, 0]), peaks, 2, 2)
    assert peaks.tolist() == [2, 0]  # 0 is held until its second event, over 1's
    with pytest.raises(ValueError, match="outside"):
        module.needed(stage, mb, peaks, 2, 1)
    with pytest.raises(ValueError, match="do not fit"):
        module.needed(stage, mb, np.zeros(3, dtype=np.int64), 2, 2)


def test_the_compiled_buffer_check_refuses_keys_outside_its_table():
    module = kernels.compiled()
    assert module is not None
    key = np.array([0, 5], dtype=np.int64)
    flags = np.array([1, 0], dtype=np.uint8)
    mb = np.array([0, 0], dtype=np.int64)
    assert module.clean(key, flags, mb, 6, -1) is False  # key 5 was never written
    assert module.clean(np.array([0, 0], dtype=np.int64), flags, mb, 1, -1) is True
    with pytest.raises(ValueError, match="outside"):
        module.clean(key, flags, mb, 5, -1)
    with pytest.raises(ValueError, match="one length"):
        module.clean(key, flags[:1], mb, 6, -1)


def test_the_numpy_fallback_is_what_runs_without_the_kernels(monkeypatch):
    """Without the compiled module the same answers come from numpy (as on a machine with no C
    compiler)."""
    schedule = with_buffers(build("deepspeed-train", 3, 6), [1, 1, 1])
    with_kernels = buffer_hazards(schedule)
    seen = []
    original = buffers_module._clean_numpy
    monkeypatch.setattr(buffers_module, "_clean_numpy", lambda *a: seen.append(1) or original(*a))
    with kernels.disabled():
        assert buffer_hazards(schedule) == with_kernels and seen


def test_the_environment_can_rule_the_kernels_out(monkeypatch):
    """EXPLORER_NO_KERNELS=1 runs the numpy versions (to rule the C out when an answer looks
    wrong); unset or "0", the compiled module is loaded."""
    monkeypatch.setenv(kernels.NO_KERNELS, "1")
    assert kernels._load() is None
    monkeypatch.setenv(kernels.NO_KERNELS, "0")
    assert kernels._load() is not None
    monkeypatch.delenv(kernels.NO_KERNELS)
    assert kernels._load() is not None
