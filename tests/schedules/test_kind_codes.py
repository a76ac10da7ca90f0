"""Per-kind tests by byte arithmetic (:mod:`explorer.pipeline.analysis.exchanges`) agree with the
per-kind tables they replace, for every kind and either column type."""

from __future__ import annotations

import numpy as np
import pytest

from explorer.pipeline.analysis.exchanges import (
    EXCHANGE_CLASS,
    exchange_classes,
    kind_codes,
    kinds_in,
)
from explorer.pipeline.schedules.instructions import COMPUTE_KINDS, Kind

EVERY_KIND = np.arange(len(Kind))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_exchange_classes_equal_the_table(dtype):
    kind = np.tile(EVERY_KIND, 3).astype(dtype)
    assert exchange_classes(kind).dtype == np.int8
    assert (exchange_classes(kind) == EXCHANGE_CLASS[kind.astype(np.intp)]).all()


@pytest.mark.parametrize("dtype", [np.int8, np.int64])
def test_kinds_in_a_range_equal_membership(dtype):
    kind = EVERY_KIND.astype(dtype)
    compute = np.array([k in COMPUTE_KINDS for k in Kind])
    assert (kinds_in(kind, Kind.FORWARD, Kind.BACKWARD_WEIGHT) == compute).all()
    assert (kinds_in(kind, Kind.LOAD, Kind.LOAD) == (kind == Kind.LOAD)).all()


def test_kind_codes_view_a_schedules_own_column():
    kind = EVERY_KIND.astype(np.int8)
    assert np.shares_memory(kind_codes(kind), kind)
    assert (kind_codes(EVERY_KIND) == EVERY_KIND).all()
