"""``explorer.xla.hlo`` stays pure: importing it and diffing must not pull in torch or plotly."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.slow  # a fresh interpreter: this one's sys.modules holds what other tests imported
def test_no_heavy_imports(data_dir):
    code = (
        "import sys, explorer.xla.hlo as h\n"
        f"a = h.read_modules({data_dir + '/order_a.hlo.txt'!r})[0]\n"
        f"b = h.read_modules({data_dir + '/order_b.hlo.txt'!r})[0]\n"
        "h.diff_modules(a, b); h.canonical_text(a)\n"
        "import explorer.xla.cli.hlo\n"
        "print(sorted(m for m in ('torch', 'torch_xla', 'plotly', 'ipywidgets') if m in sys.modules))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
