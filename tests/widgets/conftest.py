"""Shared fixtures for the explorer's views, widgets, notebooks and browser tests."""

from __future__ import annotations

import pytest

from explorer.pipeline.analysis import build, check


@pytest.fixture(scope="session")
def seed_bug():
    """The seed's broken schedule: DeepSpeed's buffer count without the +1, old P2P order."""
    return check(build("deepspeed-train", 4, 8, buffers="fixed", order="legacy"))


@pytest.fixture(scope="session")
def seed_fixed():
    """Today's DeepSpeed: fewer buffers and the reordered exchanges."""
    return check(build("deepspeed-train", 4, 8, buffers="fixed", order="fixed"))
