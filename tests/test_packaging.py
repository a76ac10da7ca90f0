"""pyproject.toml and environment.yml describe the same environment; the set-up files exist."""

from __future__ import annotations

from pathlib import Path

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
    assert scripts["explorer"] == "explorer.cli:main"


def test_every_file_the_package_reads_is_declared_as_package_data():
    """A wheel holds a package's non-Python files only when package-data names them: the plot
    view's JavaScript moved with its module once and its declaration had to follow it."""
    import fnmatch

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]
    package = ROOT / "explorer"
    missing = []
    for path in package.rglob("*"):
        if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
            continue
        # declared by its folder's package, or by a package above it with a sub-path glob
        # ("explorer.lessons" = ["content/*.md"])
        owners = [path.parent, *path.parent.parents]
        if not any(
            fnmatch.fnmatch(path.relative_to(owner).as_posix(), g)
            for owner in owners
            if owner == package or package in owner.parents
            for g in declared.get(".".join(owner.relative_to(ROOT).parts), [])
        ):
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []
