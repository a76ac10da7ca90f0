"""The collector pauses of ``explorer.gcpause``: off inside the block, on after it, and what a
dedicated process imported is frozen (never walked again, never written by a forked rank)."""

from __future__ import annotations

import gc

from explorer.gcpause import frozen_imports, paused_gc


def test_paused_gc_is_off_inside_and_leaves_nothing_frozen() -> None:
    frozen = gc.get_freeze_count()
    with paused_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(2000)]
    assert gc.isenabled() and gc.get_freeze_count() == frozen and len(kept) == 2000


def test_frozen_imports_freeze_what_the_block_made() -> None:
    frozen = gc.get_freeze_count()
    try:
        with frozen_imports():
            assert not gc.isenabled()
            kept = [[i] for i in range(2000)]
        assert gc.isenabled() and gc.get_freeze_count() >= frozen + len(kept)
    finally:
        gc.unfreeze()  # this test process is not one of the explorer's children


def test_a_collector_turned_off_by_the_caller_stays_off() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
        with frozen_imports():
            pass
        assert not gc.isenabled()
    finally:
        gc.unfreeze()
        gc.enable()
