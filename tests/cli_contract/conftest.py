"""Fixtures for the bad-input tables: one folder of bad inputs, ``{d}`` in the tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from .fixtures import make_bad_folder


@pytest.fixture(scope="session")
def bad(tmp_path_factory) -> Path:
    """The folder of bad inputs every table points at as ``{d}``."""
    return make_bad_folder(tmp_path_factory.mktemp("bad"))
