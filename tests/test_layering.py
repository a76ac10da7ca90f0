"""Layers hold: no module imports a higher layer, and heavy packages stay at the edge.

Two kinds of check. The static one parses every module of ``explorer/`` with :mod:`ast` and
collects every ``explorer.*`` import, at module level and inside functions, so a lazy import
that climbs a layer is caught as surely as a top-level one; it runs in the fast tier. The
dynamic one imports a module in a fresh interpreter and reads ``sys.modules``, which also
catches what the imported modules pull in transitively; it starts a process, so it is slow.

Layers, low to high (a module may import its own layer and any lower one)::

    0  explorer (the package itself), errors, inputs, schedules
    1  analysis, hlo, traces, report       the pure core: may import each other
    2  runtime                             starts processes, imports torch lazily
    3  views                               plotly figures
    4  widgets                             the only ipywidgets/anywidget importer
    5  commands, cli                       the terminal
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import explorer

#: Layer of each top-level part of ``explorer`` (a subpackage or a top-level module).
LAYERS: dict[str, int] = {
    "": 0,  # explorer/__init__.py
    "errors": 0,
    "inputs": 0,
    "loading": 0,
    "schedules": 0,
    "analysis": 1,
    "hlo": 1,
    "traces": 1,
    "printout": 1,
    "runtime": 2,
    "views": 3,
    "widgets": 4,
    "commands": 5,
    "cli": 5,
    "__main__": 5,
}
LAYER_NAMES = ("base", "pure core", "runtime", "views", "widgets", "commands/cli")
#: Public entry points the package itself re-exports lazily (inside ``__getattr__``, so
#: ``import explorer`` stays light): the one line a user adds to their own training script.
FACADE = frozenset({("explorer", "explorer.runtime.deepspeed.instrument")})
#: Parts whose modules must not import a heavy package at module level.
PURE = frozenset(part for part, layer in LAYERS.items() if layer <= 1)
HEAVY = ("torch", "torch_xla", "plotly", "ipywidgets", "deepspeed", "anywidget")
WIDGET_PACKAGES = ("ipywidgets", "anywidget")

PACKAGE_ROOT = Path(explorer.__file__).parent


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it sits and whether it runs at import time."""

    module: str  # importing module, dotted
    target: str  # imported module, dotted (for ``from a import b``: ``a.b`` when b is a module)
    line: int
    module_level: bool  # False inside a function body or under ``if TYPE_CHECKING:``


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at ``path`` inside the package whose folder is ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names, relative levels resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.lru_cache(maxsize=8)
def _modules_under(root: Path) -> frozenset[str]:
    return frozenset(module_name(p, root) for p in root.rglob("*.py"))


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every import in one file, with the runtime context each one runs in."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    known = _modules_under(root)

    def visit(node: ast.AST, module_level: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), False)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), module_level)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, child.lineno, module_level))
            elif isinstance(child, ast.ImportFrom):
                source = _resolve_from(child, module, is_package)
                for alias in child.names:
                    candidate = f"{source}.{alias.name}"
                    target = candidate if candidate in known else source
                    found.append(Import(module, target, child.lineno, module_level))
            else:
                visit(child, module_level)

    visit(tree, True)
    return found


def part_of(dotted: str, package: str) -> str | None:
    """The top-level part (``"analysis"``, ``"cli"``, ``""`` for the package) of a dotted name."""
    if dotted == package:
        return ""
    if not dotted.startswith(package + "."):
        return None
    return dotted.split(".")[1]


def layering_violations(root: Path, layers: dict[str, int] = LAYERS) -> list[str]:
    """One line per import that breaks the layering rules, for the package in folder ``root``.

    Rules: no import of a higher layer (anywhere in the file); the pure core imports no heavy
    package at module level; ``views`` never imports a widget package; nothing but ``widgets``
    imports one. A part missing from ``layers`` is itself a violation: a new package must be
    placed deliberately.
    """
    package = root.name
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        source_part = part_of(module_name(path, root), package)
        if source_part not in layers:
            problems.append(f"{rel}: part {source_part!r} has no layer; add it to LAYERS")
            continue
        source_layer = layers[source_part]
        for imp in imports_of(path, root):
            where = f"{rel}:{imp.line}"
            top = imp.target.split(".")[0]
            target_part = part_of(imp.target, package)
            if target_part is not None:
                if target_part not in layers:
                    problems.append(f"{where}: imports {imp.target}, whose part has no layer")
                elif layers[target_part] > source_layer and not (
                    (imp.module, imp.target) in FACADE and not imp.module_level
                ):
                    problems.append(
                        f"{where}: {source_part or package} (layer {source_layer}) imports "
                        f"{imp.target} (layer {layers[target_part]}, higher)"
                    )
            if top in HEAVY and imp.module_level and source_part in PURE:
                problems.append(f"{where}: pure module imports {top} at module level")
            if top in WIDGET_PACKAGES and source_part != "widgets":
                problems.append(f"{where}: imports {top}; only explorer.widgets may")
    return problems


def test_no_module_imports_a_higher_layer_or_a_heavy_package_out_of_place():
    problems = layering_violations(PACKAGE_ROOT)
    assert not problems, "layering broken:\n" + "\n".join(problems)


def test_every_part_of_the_package_has_a_layer():
    parts = {part_of(module_name(p, PACKAGE_ROOT), "explorer") for p in PACKAGE_ROOT.rglob("*.py")}
    assert parts <= set(LAYERS), f"unplaced parts: {sorted(parts - set(LAYERS))}"


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "explorer"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CLEAN = {
    "errors.py": "",
    "schedules/__init__.py": "from explorer.errors import x\n",
    "analysis/__init__.py": "from . import check\nfrom explorer.hlo import y\n",
    "analysis/check.py": "from ..schedules import z\nfrom explorer import errors\n",
    "hlo/__init__.py": "from explorer.traces import t\n",
    "traces/__init__.py": "from explorer.analysis.check import c\n",
    "runtime/__init__.py": "def f():\n    import torch\n    from explorer.analysis import a\n",
    "views/__init__.py": "import plotly.graph_objects as go\nfrom explorer.runtime import r\n",
    "widgets/__init__.py": "import ipywidgets\nimport anywidget\nfrom explorer.views import v\n",
    "commands/__init__.py": "from explorer.widgets import w\n",
    "cli.py": "from explorer.commands import c\n",
}


def test_checker_accepts_a_well_layered_tree(tmp_path):
    assert layering_violations(_plant(tmp_path, CLEAN)) == []


@pytest.mark.parametrize(
    "name, text, expected",
    [
        # a module-level climb, absolute and relative
        ("schedules/bad.py", "from explorer.analysis import check\n", "imports explorer.analysis"),
        ("analysis/bad.py", "from ..runtime import r\n", "imports explorer.runtime"),
        # a function-level (lazy) climb is a climb too
        ("hlo/bad.py", "def f():\n    import explorer.views\n", "imports explorer.views"),
        ("runtime/bad.py", "def f():\n    from explorer import widgets\n", "explorer.widgets"),
        ("views/bad.py", "from explorer.commands import c\n", "imports explorer.commands"),
        ("widgets/bad.py", "from explorer.cli import main\n", "imports explorer.cli"),
        # heavy packages at module level in the pure core
        ("traces/bad.py", "import torch\n", "imports torch at module level"),
        ("analysis/bad.py", "from plotly import graph_objects\n", "imports plotly"),
        ("errors.py", "import deepspeed\n", "imports deepspeed"),
        ("hlo/bad.py", "try:\n    import torch_xla\nexcept ImportError:\n    pass\n", "torch_xla"),
        # widget packages outside widgets, even lazily
        ("views/bad.py", "def f():\n    import ipywidgets\n", "only explorer.widgets may"),
        ("runtime/bad.py", "def f():\n    import anywidget\n", "only explorer.widgets may"),
        # a new package nobody placed
        ("newpart/__init__.py", "", "has no layer"),
    ],
    ids=[
        "schedules-imports-analysis",
        "analysis-imports-runtime-relatively",
        "hlo-imports-views-in-a-function",
        "runtime-imports-widgets-in-a-function",
        "views-imports-commands",
        "widgets-imports-cli",
        "traces-imports-torch",
        "analysis-imports-plotly",
        "errors-imports-deepspeed",
        "hlo-tries-torch_xla",
        "views-imports-ipywidgets-in-a-function",
        "runtime-imports-anywidget-in-a-function",
        "an-unplaced-package",
    ],
)
def test_checker_finds_a_planted_violation(tmp_path, name, text, expected):
    problems = layering_violations(_plant(tmp_path, {**CLEAN, name: text}))
    assert len(problems) == 1 and expected in problems[0], problems
    assert name.split("/")[0] in problems[0]


def test_checker_allows_heavy_imports_inside_functions_and_for_type_checking(tmp_path):
    lazy = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\n"
        "def f():\n    import torch_xla\n    import plotly\n"
    )
    assert layering_violations(_plant(tmp_path, {**CLEAN, "analysis/lazy.py": lazy})) == []


# The dynamic checks: each starts an interpreter, so they live in the slow tier.


@pytest.mark.slow
@pytest.mark.parametrize(
    "module",
    [
        "explorer.schedules",
        "explorer.analysis",
        "explorer.printout.listing",
        "explorer.traces.torch_trace",
        "explorer.traces.compile_profile",
        "explorer.traces.torch_trace_detect",
        "explorer.traces.detect",
        "explorer.traces.compile.from_trace",
        "explorer.traces.compile.ranks",
        "explorer.printout.html",
        "explorer.cli",
        "explorer.runtime.pipelining_orders",
        "explorer.runtime.supervise",
        "explorer.traces.failure",
        "explorer",
        "explorer.traces.pipeline.instrumented",
        "explorer.runtime.deepspeed.guard",
        "explorer.runtime.deepspeed.schedules",
        "explorer.runtime.deepspeed.engine",
    ],
)
def test_import_does_not_pull_heavy_packages(module):
    code = f"import sys, json, {module}; print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


@pytest.mark.slow
def test_building_and_checking_a_schedule_stays_light():
    code = (
        "import sys, json; from explorer.analysis import build, check; check(build('1f1b', 4, 8)); "
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


@pytest.mark.slow
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
