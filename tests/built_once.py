"""Expensive session fixtures built once per test run, not once per pytest-xdist worker.

With ``-n 2`` every worker is its own session, so a session fixture that tests on both
workers use was built twice (six pipeline launches, three XLA compiles each time). The
first worker to ask builds the value under a file lock and pickles it into the folder the
workers share (the parent of each one's base temporary folder, new for every run); the
other reads it back. Without xdist it is an ordinary call.
"""

from __future__ import annotations

import os
import pickle
from typing import Callable, TypeVar

import pytest
from filelock import FileLock

T = TypeVar("T")

__all__ = ["built_once"]


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[], T]) -> T:
    """``build()``, called by one worker of this run; the others get its pickled result."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return build()
    shared = factory.getbasetemp().parent  # pytest-N/, above every worker's popen-gwK/
    path = shared / f"built-once-{name}.pickle"
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return pickle.loads(path.read_bytes())
        value = build()
        path.write_bytes(pickle.dumps(value))
        return value
