"""Keeping freed memory in the explorer's own processes (:mod:`explorer.processes.heap`)."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

from explorer.processes import heap

_CHILD = """
import resource, sys
import numpy as np
if sys.argv[1] == "keep":
    from explorer.processes.heap import keep_freed_memory
    assert keep_freed_memory()
for _ in range(2):  # the first round may grow the heap; the second is the one measured
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):  # 16 columns of 3 MB alive at once, then all freed (a schedule's check)
        columns = [np.ones(375_000) for _ in range(16)]
        del columns
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def test_sets_both_thresholds_through_mallopt(monkeypatch):
    calls = []

    def mallopt(param, value):
        calls.append((param, value))
        return 1

    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda _: types.SimpleNamespace(mallopt=mallopt))
    assert heap.keep_freed_memory()
    # Both: a trim threshold alone would fix the mmap threshold at glibc's 128 KiB.
    assert calls == [(-3, heap.MMAP_THRESHOLD), (-1, heap.TRIM_THRESHOLD)]


def test_does_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(heap.sys, "platform", "darwin")
    assert not heap.keep_freed_memory()
    monkeypatch.setattr(heap.sys, "platform", "linux")
    monkeypatch.setattr(heap.ctypes, "CDLL", lambda _: types.SimpleNamespace())  # no mallopt
    assert not heap.keep_freed_memory()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_a_worker_that_keeps_freed_memory_faults_far_less():
    def faults(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, check=True
        )
        return int(out.stdout.split()[-1])

    plain, kept = faults("plain"), faults("keep")
    # 3 x 48 MB touched afresh is about 36,000 faults of 4 KiB pages; reused, next to none.
    assert plain > 10_000
    assert kept < plain / 10
