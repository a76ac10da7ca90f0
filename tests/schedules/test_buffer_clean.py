"""The buffer-dataflow shortcut: judging a schedule clean in key order must agree with
naming every hazard in stream order."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.pipeline.analysis import buffers as B
from explorer.pipeline.analysis import build
from tests.schedules.strategies import schedule_args


def _full(schedule):
    """``buffer_hazards`` with the shortcut switched off (every schedule resolved in full)."""
    saved = B._clean
    B._clean = lambda *args: False
    try:
        return B.buffer_hazards(schedule)
    finally:
        B._clean = saved


@settings(max_examples=150, deadline=None)
@given(schedule_args(max_stages=6, max_microbatches=12), st.data())
def test_clean_shortcut_agrees_with_full_resolution(args, data):
    kind, p, m, v = args
    s = build(kind, p, m, chunks=v)
    # Fewer buffers than needed on some stages, and sometimes a swapped pair of rows of one
    # rank, so that both outcomes (clean and not) and both kinds of hazard occur.
    counts = [data.draw(st.integers(1, max(1, n))) for n in s.buffers]
    s = B.with_buffers(s, counts)
    if len(s) > 1 and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(s) - 2))
        if s.rank[i] == s.rank[i + 1]:
            cols = {c: getattr(s, c).copy() for c in ("kind", "stage", "microbatch", "buffer")}
            for col in cols.values():
                col[[i, i + 1]] = col[[i + 1, i]]
            s = s.replace(**cols)
    full = _full(s)
    said = []
    saved = B._clean
    B._clean = lambda *a: said.append(saved(*a)) or said[-1]
    try:
        fast = B.buffer_hazards(s)
    finally:
        B._clean = saved
    assert fast == full
    # The shortcut ran and judged clean exactly the schedules without hazards.
    assert said == [not full]
