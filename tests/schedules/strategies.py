"""Hypothesis strategies for schedule parameters, shared by the property tests."""

from __future__ import annotations

from hypothesis import strategies as st

SINGLE_CHUNK_KINDS = ("deepspeed-train", "deepspeed-inference", "gpipe", "1f1b", "zb-h1")


@st.composite
def schedule_args(draw, max_stages: int = 8, max_microbatches: int = 24):
    """(kind, stages, microbatches, chunks) for any generator, respecting its constraints."""
    kind = draw(st.sampled_from(SINGLE_CHUNK_KINDS + ("interleaved-1f1b", "dualpipev")))
    p = draw(st.integers(1, max_stages))
    if kind == "dualpipev":  # p ranks, 2p stages, at least 2p micro-batches
        p = max(1, p // 2)
        return kind, p, draw(st.integers(2 * p, max(2 * p, max_microbatches))), 1
    if kind == "interleaved-1f1b":
        v = draw(st.integers(1, 3))
        m = p * draw(st.integers(1, max(1, max_microbatches // p)))
        return kind, p, m, v
    return kind, p, draw(st.integers(1, max_microbatches)), 1
