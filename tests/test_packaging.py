"""pyproject.toml and environment.yml describe the same environment; the set-up files exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_environment_yml_installs_the_same_extras_as_make():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    extras = {e.strip() for e in pip[0].split("[", 1)[1].rstrip("]").split(",")}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    all_extras = project["optional-dependencies"]["all"][0]
    assert extras == set(all_extras.split("[", 1)[1].rstrip("]").split(","))
    assert extras <= set(project["optional-dependencies"])
    assert project["requires-python"] == ">=3.10"


def test_xla_extra_pins_matching_torch_and_torch_xla():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras["xla"]) == {"torch==2.9.0", "torch_xla==2.9.0"}
    assert any(d.startswith("anywidget") for d in extras["lab"])


def test_readme_and_ci_use_the_two_make_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make lab" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["explorer"] == "explorer.cli:program"


def test_every_file_the_package_reads_is_declared_as_package_data():
    """A wheel holds a package's non-Python files only when package-data names them: the plot
    view's JavaScript moved with its module once and its declaration had to follow it."""
    import fnmatch

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    package = ROOT / "explorer"
    # the compiled kernels: their source is an extension's (setup.py), their build its output
    extension_sources = (ROOT / "setup.py").read_text()
    missing = []
    for path in package.rglob("*"):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        relative = path.relative_to(ROOT).as_posix()
        if path.suffix in (".so", ".pyd") or f'"{relative}"' in extension_sources:
            continue
        # setuptools reads each glob relative to the package that declares it (a subfolder
        # such as "content/*.md" included): try every package above the file
        parts = path.relative_to(ROOT).parts
        owners = [(".".join(parts[:i]), "/".join(parts[i:])) for i in range(1, len(parts))]
        if not any(
            fnmatch.fnmatch(rest, g) for dotted, rest in owners for g in declared.get(dotted, [])
        ):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


@pytest.mark.slow  # runs make
def test_make_test_gpu_needs_no_network_and_collects_only_the_gpu_test_files(tmp_path):
    """A GPU machine is often offline: ``make test-gpu`` must not depend on ``install`` (pip)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    plan = subprocess.run(
        ["make", "-n", "test-gpu", f"VENV={tmp_path / 'no-venv'}"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "-m pip" not in plan and "-m venv" not in plan, plan
    assert " -m gpu " in plan and "python3 -m pytest" in plan  # the machine's own python
    assert (
        "tests/pipeline/test_pipeline_gpu.py" in plan
        and "tests/compile/test_compile_gpu.py" in plan
    )
    assert "tests/browser" not in plan  # nothing that needs the rest of the install
