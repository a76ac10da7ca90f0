"""The pure core stays light: importing it never imports torch, torch_xla, plotly or ipywidgets."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "torch_xla", "plotly", "ipywidgets", "deepspeed")


@pytest.mark.parametrize(
    "module",
    [
        "explorer.schedules",
        "explorer.analysis",
        "explorer.report.listing",
        "explorer.traces.torch_trace",
        "explorer.traces.compile_profile",
        "explorer.traces.torch_trace_detect",
        "explorer.traces.detect",
        "explorer.traces.compile.from_trace",
        "explorer.traces.compile.ranks",
        "explorer.report.html",
        "explorer.cli",
        "explorer.runtime.pipelining_orders",
        "explorer.runtime.supervise",
        "explorer.traces.failure",
    ],
)
def test_import_does_not_pull_heavy_packages(module):
    code = f"import sys, json, {module}; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_building_and_checking_a_schedule_stays_light():
    code = (
        "import sys, json; from explorer.analysis import build, check; check(build('1f1b', 4, 8)); "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


def test_the_cli_parser_with_every_command_stays_light():
    """`explorer --help` and `explorer check` must not pay for torch: commands import it when they run."""
    code = (
        "import sys, json; from explorer.cli import build_parser; build_parser(); "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []
