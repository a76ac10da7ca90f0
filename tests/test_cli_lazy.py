"""The CLI imports only the module of the command it runs; the name table must stay complete."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from explorer.cli import COMMAND_NAMES, COMMANDS


def test_every_registered_command_is_in_the_table_with_its_module():
    seen = {}
    for module in COMMANDS:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        for name in sub.choices:
            seen[name] = module
    assert seen == COMMAND_NAMES


@pytest.mark.slow  # a fresh interpreter
def test_hlo_diff_imports_nothing_of_the_pipeline_product():
    code = (
        "import sys, json\n"
        "from explorer import cli\n"
        "try:\n    cli.main(['hlo-diff', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('numpy', 'explorer.')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert "explorer.xla.cli.hlo" in loaded
    assert [m for m in loaded if m.startswith("explorer.pipeline")] == []
    assert not [m for m in loaded if m.startswith("numpy")]
