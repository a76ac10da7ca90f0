"""Real XLA runs shared by the tests: each preset runs once per session, small (1 layer, width 32).

Every run is a real torch_xla 2.9 child process on the PJRT CPU device; the fixtures only
avoid paying for the same compile twice (also across pytest-xdist workers: ``built_once``).
"""

from __future__ import annotations

import pytest
from built_once import built_once


def _run(name: str, **options):
    from explorer.xla.runtime import run_scenario

    return run_scenario(name, layers=1, **options)


@pytest.fixture(scope="session")
def steady_run(tmp_path_factory):
    return built_once(tmp_path_factory, "xla-steady-run", lambda: _run("steady", steps=5))


@pytest.fixture(scope="session")
def logging_run(tmp_path_factory):
    return built_once(tmp_path_factory, "xla-logging-run", lambda: _run("logging", steps=6))


@pytest.fixture(scope="session")
def scalar_run(tmp_path_factory):
    return built_once(tmp_path_factory, "xla-scalar-run", lambda: _run("scalar", steps=4))
