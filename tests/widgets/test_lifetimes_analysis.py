"""Buffer occupancy intervals: the seed's overwrite shows as an overlap, and the peak overlap
is exactly the core's ``needed_buffers``."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.lifetimes import _unique_triples, occupancy, substep_positions
from explorer.pipeline.schedules import KINDS


def _slot(occ, stage, buffer):
    keep = (occ.stage == stage) & (occ.buffer == buffer)
    return {
        int(m): (a, s, e)
        for m, a, s, e in zip(occ.microbatch[keep], occ.start[keep], occ.split[keep], occ.end[keep])
    }


def test_legacy_order_overlaps_in_step_6_and_fixed_order_only_touches():
    legacy = _slot(occupancy(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")), 2, 0)
    fixed = _slot(occupancy(build("deepspeed-train", 4, 8, buffers="fixed", order="fixed")), 2, 0)
    # Micro-batch 0 enters buffer 0 at step 2 (RecvActivation) and is backward at step 5.
    assert legacy[0][0] == 2.0 and 5 <= legacy[0][1] < 6
    # Legacy order: RecvActivation of micro-batch 2 (first in step 6) starts before SendGrad of 0 ends.
    assert legacy[2][0] == 6.0 and legacy[0][2] > legacy[2][0]
    # Fixed order: SendGrad first, then the receive: the intervals meet but do not overlap.
    assert fixed[0][2] == pytest.approx(fixed[2][0])


@pytest.mark.parametrize("kind", list(KINDS))
def test_peak_overlap_per_stage_equals_needed_buffers(kind):
    chunks = 2 if kind == "interleaved-1f1b" else 1
    report = check(build(kind, 4, 8, chunks=chunks))
    occ = occupancy(report.schedule)
    for stage in range(report.schedule.num_stages):
        mine = occ.of_stage(stage)
        points = np.r_[mine.start, mine.end - 1e-9]
        live = [int(((mine.start <= x) & (x < mine.end)).sum()) for x in points] or [0]
        assert max(live) == report.buffers.needed[stage], (kind, stage)


def test_substeps_split_each_step_in_instruction_order():
    s = build("deepspeed-train", 4, 8, buffers="fixed", order="legacy")
    start, end = substep_positions(s)
    rows = [i for i in range(len(s)) if s.rank[i] == 2 and s.step[i] == 6]
    assert [str(s.instruction(i)) for i in rows] == ["2RA2b0", "2SG0b0", "2F2b0"]
    assert start[rows].tolist() == pytest.approx([6.0, 6 + 1 / 3, 6 + 2 / 3])
    assert end[rows[-1]] == pytest.approx(7.0)


@pytest.mark.slow  # a fresh interpreter
def test_core_helpers_stay_light():
    """Occupancy and trace reading are core: no plotly, ipywidgets or torch on import."""
    import subprocess
    import sys

    code = (
        "import sys, explorer.pipeline.analysis.lifetimes, explorer.pipeline.traces; "
        "print(sorted(m for m in ('plotly', 'ipywidgets', 'torch') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("low, high", [(0, 5), (0, 3_000), (-2, 4), (0, 2**31)])
def test_unique_triples_answers_as_numpys_row_unique(low, high):
    """The packed-key unique gives np.unique(axis=0)'s rows and inverse, packing or not."""
    rng = np.random.default_rng(high)
    a, b, c = (rng.integers(low, high, 4_000, dtype=np.int64) for _ in range(3))
    uniq, inverse = _unique_triples(a, b, c)
    want, want_inverse = np.unique(np.stack([a, b, c], axis=1), axis=0, return_inverse=True)
    assert np.array_equal(uniq, want) and np.array_equal(inverse, want_inverse.reshape(-1))
    assert np.array_equal(uniq[inverse], np.stack([a, b, c], axis=1))
