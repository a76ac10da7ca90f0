"""The one ``MODULE:NAME`` loader: every shape of mistake is one InputError with the same wording."""

from __future__ import annotations

import sys

import pytest

from explorer.errors import InputError
from explorer.loading import load_ref, split_ref


@pytest.mark.parametrize(
    "spec, words",
    [
        ("nocolon", "--opt 'nocolon': expected MODULE:FUNCTION, e.g. m:f"),
        (":f", "expected MODULE:FUNCTION"),
        ("m:", "expected MODULE:FUNCTION"),
        ("m:1x", "'1x' is not a Python name"),
        ("a b:f", "'a b' is not a module name"),
        ("my-train.py:f", "'my-train.py' is not a module name"),
    ],
)
def test_split_ref_names_the_wrong_part(spec, words):
    with pytest.raises(InputError) as err:
        split_ref(spec, "--opt", "m:f")
    assert words in str(err.value)


def test_split_ref_reads_dotted_paths_and_files(tmp_path):
    assert split_ref("pkg.mod.fn", "backend", "p.f", dotted=True) == ("pkg.mod", "fn")
    assert split_ref("m:Cls.make", "--opt", "m:f") == ("m", "Cls.make")
    with pytest.raises(InputError, match="file '.*missing.py' does not exist"):
        split_ref(f"{tmp_path}/missing.py:f", "--step", "m:f", files=True)


def test_load_ref_resolves_modules_attributes_and_files(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lr_mod.py").write_text(
        "class K:\n    @staticmethod\n    def make():\n        return 7\nN = 3\n"
    )
    (tmp_path / "my-train.py").write_text("def step(i):\n    return i + 1\n")
    assert load_ref("lr_mod:K.make", "--opt", "m:f")() == 7
    assert load_ref("os.path.join", "backend", "p.f", dotted=True, expect="callable") is (
        sys.modules["os.path"].join
    )
    assert load_ref(f"{tmp_path}/my-train.py:step", "--step", "m:f", files=True)(1) == 2
    with pytest.raises(InputError, match="module 'lr_mod' has no attribute 'nope'"):
        load_ref("lr_mod:nope", "--opt", "m:f")
    with pytest.raises(InputError, match="'N' is a int, not a function"):
        load_ref("lr_mod:N", "--step", "m:f", expect="function")
    with pytest.raises(InputError, match="cannot import module 'no_such_mod_lr'"):
        load_ref("no_such_mod_lr.fn", "backend", "p.f", dotted=True)


def test_load_ref_tells_a_failing_top_level_from_a_missing_name(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "lr_attr.py").write_text("import os\nos.no_such_thing\n")
    (tmp_path / "lr_bad.py").write_text("1/0\n")
    with pytest.raises(InputError, match="importing module 'lr_attr' raised AttributeError"):
        load_ref("lr_attr:f", "--opt", "m:f")
    with pytest.raises(InputError, match=r"running .*lr_bad.py raised ZeroDivisionError"):
        load_ref(f"{tmp_path}/lr_bad.py:f", "--step", "m:f", files=True)


@pytest.mark.slow  # a fresh interpreter
def test_the_loader_is_pure():
    """Argparse types and configs use it before any heavy package is imported."""
    import json
    import subprocess

    code = (
        "import sys, json, explorer.loading; print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('torch', 'torch_xla', 'plotly', 'ipywidgets', 'deepspeed'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []
