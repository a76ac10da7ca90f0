"""Shared paths and loaders for the HLO tests (fixtures are real torch_xla 2.9 output)."""

from __future__ import annotations

import os

import pytest

from explorer.xla.hlo import Module, read_modules

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")


def fixture_path(name: str) -> str:
    return os.path.join(DATA, name)


@pytest.fixture(scope="session")
def data_dir() -> str:
    return DATA


@pytest.fixture(scope="session")
def load():
    cache: dict[str, list[Module]] = {}

    def _load(name: str) -> list[Module]:
        if name not in cache:
            cache[name] = read_modules(fixture_path(name))
        return cache[name]

    return _load
