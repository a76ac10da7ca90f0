"""Refusals at the edge import no heavy package: a bad number costs milliseconds, not a torch import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Each case starts a fresh interpreter (sys.modules in this one already holds what other tests
#: imported).
pytestmark = pytest.mark.slow

HEAVY = ("torch", "torch_xla", "plotly", "ipywidgets", "deepspeed")

REFUSALS = [
    ["check", "--kind", "1f1b", "--stages", "99999999999999999999", "--microbatches", "8"],
    ["check", "--kind", "1f1b", "--stages", "1000", "--microbatches", "20000"],
    ["schedule", "--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--costs", "B=inf"],
    ["run", "--kind", "1f1b", "--stages", "2", "--microbatches", "100000"],
    ["run", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stall-timeout", "nan"],
    [
        "run",
        "--kind",
        "1f1b",
        "--stages",
        "2",
        "--microbatches",
        "4",
        "--trace",
        "/no/such/folder/t.json",
    ],
    ["run", "--collect", "/no/such/run"],
    ["xla-run", "--scenario", "steady", "--timeout", "inf"],
    ["xla-run", "--scenario", "steady", "--bucket-mb", "nan"],
    ["xla-run", "--scenario", "steady", "--width", "33"],
    ["hlo-list", "/dev/zero"],
    ["hlo-diff", "/no/such/a.hlo", "/no/such/b.hlo"],
    ["compile-probe", "--scenario", "cycling", "--iterations", "100000000"],
    ["compile-probe", "--scenario", "cycling", "--config", "/dev/null"],
    ["compile-probe", "--step", ":step"],
]


@pytest.mark.parametrize("argv", REFUSALS, ids=lambda a: " ".join(a)[:60])
def test_a_refusal_imports_no_heavy_package(argv):
    code = (
        "import sys, json\nfrom explorer.cli import main\n"
        f"try:\n    code = main({argv!r})\nexcept SystemExit as exc:\n    code = exc.code\n"
        f"print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    code, heavy = json.loads(out.stdout.strip().splitlines()[-1])
    assert code == 2, out.stderr
    assert heavy == [], f"{' '.join(argv)} imported {heavy[:5]}"
