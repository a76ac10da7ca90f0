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
from explorer.pipeline.analysis.buffers import with_buffers
from explorer.pipeline.analysis.step_walk import StepGrid, Waits, compiled_walk, walk_numpy
from tests.schedules.strategies import schedule_args

PROPERTY = settings(max_examples=80, deadline=None)


def test_the_kernels_are_built_by_the_install():
    """``make test`` installs with a C compiler: the fast path is what the suite checks."""
    assert kernels.compiled() is not None and compiled_walk() is not None


def _timelines(schedule, costs, model):
    """The simulated starts through the compiled walk and through numpy's, and how many steps
    held waits inside them (so the test can say the rounds were exercised)."""
    matching = match(schedule)
    seen: dict[str, int] = {}

    def numpy_walk(grid, earlier, inner, bounds):
        seen["inner"] = int((bounds[1:] > bounds[:-1]).sum())
        return walk_numpy(grid, earlier, inner, bounds)

    compiled = timeline.simulate(schedule, matching, costs, model)
    original = timeline.step_walk
    timeline.step_walk = lambda: numpy_walk
    try:
        reference = timeline.simulate(schedule, matching, costs, model)
    finally:
        timeline.step_walk = original
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
    hazards = buffer_hazards(schedule)
    module = kernels._MODULE
    kernels._MODULE = None
    try:
        assert buffer_hazards(schedule) == hazards
    finally:
        kernels._MODULE = module


def test_the_buffer_check_sees_the_seeds_hazard_in_both_versions():
    """The seed's DeepSpeed schedule with one buffer fewer overwrites a gradient."""
    schedule = with_buffers(build("deepspeed-train", 4, 8), [1, 1, 1, 1])
    assert buffer_hazards(schedule)
    module = kernels._MODULE
    kernels._MODULE = None
    try:
        assert buffer_hazards(schedule)
    finally:
        kernels._MODULE = module


def _walk_args(steps=2, slots=2, ranks=2):
    """A grid of 2 steps x 2 slots x 2 ranks with one wait: cell 6 (step 1) on cell 1 (step 0)."""
    cells = steps * slots * ranks
    one = np.array([6], dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return [
        np.empty(cells + 2),
        np.ones(cells),
        one,
        np.array([1], dtype=np.int64),
        np.array([0.5]),
        empty,
        empty,
        np.zeros(0),
        np.zeros(steps + 1, dtype=np.int64),
        steps,
        slots,
        ranks,
    ]


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda a: a[3].__setitem__(0, 10**9), "not in an earlier step"),
        (lambda a: a[3].__setitem__(0, 5), "not in an earlier step"),  # step 1 reading itself
        (lambda a: a[3].__setitem__(0, -1), "not in an earlier step"),
        (lambda a: a[2].__setitem__(0, 8), "outside the grid"),
        (lambda a: a.__setitem__(1, np.zeros(3)), "do not fit"),
        (lambda a: a.__setitem__(2, a[2].astype(np.float64)), "format"),
        (lambda a: a.__setitem__(8, np.array([0, 2, 1], dtype=np.int64)), "bounds"),
        (lambda a: a.__setitem__(10, 0), "shape"),
        (lambda a: a.__setitem__(9, 2**62), "shape"),
    ],
)
def test_the_compiled_walk_refuses_arguments_that_would_read_astray(edit, said):
    module = kernels.compiled()
    assert module is not None
    args = _walk_args()
    module.walk(*args)  # the unedited arguments are walked, and as numpy walks them
    grid = StepGrid(2, 2, 2, args[1])
    expected = walk_numpy(grid, Waits(*args[2:5]), Waits(*args[5:8]), args[8])
    assert args[0].tobytes() == expected.tobytes()
    edit(args)
    with pytest.raises(ValueError, match=said):
        module.walk(*args)


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
    monkeypatch.setattr(kernels, "_MODULE", None)
    seen = []
    original = buffers_module._clean_numpy
    monkeypatch.setattr(buffers_module, "_clean_numpy", lambda *a: seen.append(1) or original(*a))
    assert buffer_hazards(schedule) == with_kernels and seen
