"""Property tests: on generated modules the diff finds exactly what was planted, at 35,000 too."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.xla.hlo import diff_modules, parse_module
from tests.hlo.synthetic import planted_pair

SCALE = float(os.environ.get("EXPLORER_FUZZ_SCALE", "1"))


def _assert_exact(seed: int, n: int, permuted: int, moved: int, inserted: int) -> None:
    a, b, planted = planted_pair(
        seed, instructions=n, permuted=permuted, moved=moved, inserted=inserted
    )
    ma, mb = parse_module(a), parse_module(b)
    assert ma.instruction_count >= n
    d = diff_modules(ma, mb)
    assert {p.index_a: p.index_b for p in d.parameter_permutation} == planted.permutation
    assert sorted(c.literal for c in d.moved_constants) == sorted(planted.moved_constants)
    assert not d.removed
    assert sum(g.count for g in d.added) == planted.inserted
    assert all(g.op_type == planted.inserted_op_type for g in d.added)
    if inserted:
        assert [(t.arity_a, t.arity_b) for t in d.tuple_arity] == [
            (planted.outputs_a, planted.outputs_a + 1)
        ]
        assert [c.name_a for c in d.changed] == [ma.entry.root.name]
    else:
        assert not d.changed and not d.tuple_arity
    assert d.matched_count == d.instructions_a


@settings(max_examples=int(12 * SCALE), deadline=None, database=None)
@given(
    seed=st.integers(0, 10**6),
    n=st.integers(300, 3000),
    permuted=st.integers(0, 12),
    moved=st.integers(0, 8),
    inserted=st.integers(0, 5),
)
def test_planted_small(seed, n, permuted, moved, inserted):
    _assert_exact(seed, n, permuted, moved, inserted)


@pytest.mark.slow  # modules of 35,000 instructions
@pytest.mark.parametrize("seed", [1, 2])
def test_planted_at_35000_instructions(seed):
    _assert_exact(seed, 35_000, permuted=26, moved=12, inserted=3)
