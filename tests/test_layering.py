"""Three products over one thin base: the rules of the layout, checked on the AST of every module.

This test is the specification of ``explorer/``'s shape (``../README.md``, "Layout")::

    explorer/
      pipeline/  schedules 0, traces 1, analysis 2, runtime 3, printout/views 4, app 5, cli 6
      xla/       hlo 0, traces 1, analysis 2, runtime 3, views 4, app 5, cli 6
      compile/   traces 0, analysis 1, runtime 2, printout/views 3, app 4, cli 5
      ground     errors, inputs, json_text, loading, failure, user_step, detect, lazy, processes, ui,
                 cli_options, verdict, compiled, folder_lock, gcpause
      door       read, cli, __main__, lessons (they teach with every product's public face)

Rules (every import counts, at module level or inside a function, except under
``if TYPE_CHECKING:``):

* products never import each other, nor the door; the ground imports no product and no door;
  the door (``explorer read`` and the CLI, which list every product) may import anything;
* inside a product the floors run one way: a module imports its own floor or a lower one, and
  the product's ``__init__`` (its public face) may import any of its floors;
* no import circle, between modules or through a package's ``__init__``;
* the pure floors (below ``runtime``) and the ground (but ``ui``) import no torch, torch_xla,
  deepspeed, plotly or ipywidgets at module level; only an ``app`` floor and ``ui`` import a
  widget package at all;
* a product's face (its ``__init__``) names by string only modules of its own product;
* a part not placed here is a violation: a new folder is placed deliberately.

The static check runs in the fast tier; the dynamic ones (an interpreter's ``sys.modules`` after
importing a module) start processes and are slow.
"""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

import explorer

#: Each product's floors, low to high. A product's ``__init__`` (its face) sits above them all.
PRODUCTS: dict[str, dict[str, int]] = {
    "pipeline": {
        "schedules": 0,
        "traces": 1,
        "analysis": 2,
        "runtime": 3,
        "printout": 4,
        "views": 4,
        "app": 5,
        "cli": 6,
    },
    "xla": {"hlo": 0, "traces": 1, "analysis": 2, "runtime": 3, "views": 4, "app": 5, "cli": 6},
    "compile": {
        "traces": 0,
        "analysis": 1,
        "runtime": 2,
        "printout": 3,
        "views": 3,
        "app": 4,
        "cli": 5,
    },
}
#: The floor every product stands on, and what it must never reach up to.
GROUND = frozenset(
    {
        "",  # explorer/__init__.py
        "errors",
        "inputs",
        "json_text",
        "loading",
        "failure",
        "user_step",
        "detect",
        "lazy",
        "processes",
        "ui",
        "cli_options",
        "verdict",
        "compiled",
        "folder_lock",
        "gcpause",
    }
)
#: Above every product: the commands that list all of them, and the lessons, which teach with
#: several products at once (through each product's public face, like ``read``).
DOOR = frozenset({"read", "cli", "__main__", "lessons"})
#: Floors below which nothing imports a heavy package at module level.
RUNTIME_FLOOR = "runtime"
#: Ground parts that may import heavy packages at module level (what every app shares).
HEAVY_GROUND = frozenset({"ui"})
#: The one light entry point the package re-exports lazily: the line a user adds to a training script.
FACADE = frozenset({("explorer", "explorer.pipeline.runtime.deepspeed.instrument")})
HEAVY = ("torch", "torch_xla", "plotly", "ipywidgets", "deepspeed", "anywidget")
WIDGET_PACKAGES = ("ipywidgets", "anywidget")

PACKAGE_ROOT = Path(explorer.__file__).parent


@dataclass(frozen=True)
class Place:
    """Where a module sits: its room (a product, ``ground`` or ``door``) and its floor there."""

    room: str
    part: str  # the product's floor name, or the ground/door part
    floor: int

    @property
    def pure(self) -> bool:
        if self.room == "ground":
            return self.part not in HEAVY_GROUND
        if self.room in PRODUCTS:
            return self.floor < PRODUCTS[self.room].get(RUNTIME_FLOOR, 99)
        return False

    @property
    def may_import_widgets(self) -> bool:
        return self.part in ("app", "ui")


@dataclass(frozen=True)
class Import:
    """One import statement's target, where it sits and whether it runs at import time."""

    module: str  # importing module, dotted
    target: str  # imported module, dotted (for ``from a import b``: ``a.b`` when b is a module)
    line: int
    module_level: bool  # False inside a function body
    type_only: bool  # under ``if TYPE_CHECKING:``


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at ``path`` inside the package whose folder is ``root``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([root.name, *parts])


def place_of(dotted: str, package: str) -> Optional[Place]:
    """The place of a module of ``package`` (None: outside the package, or a part not placed)."""
    if dotted != package and not dotted.startswith(package + "."):
        return None
    parts = dotted.split(".")[1:]
    head = parts[0] if parts else ""
    if head in PRODUCTS:
        floors = PRODUCTS[head]
        if len(parts) == 1:
            return Place(head, "", max(floors.values()) + 1)
        return Place(head, parts[1], floors[parts[1]]) if parts[1] in floors else None
    if head in GROUND:
        return Place("ground", head, 0)
    if head in DOOR:
        return Place("door", head, 0)
    return None


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
    """Every import in one file, with the context each one runs in."""
    module = module_name(path, root)
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    known = _modules_under(root)

    def visit(node: ast.AST, module_level: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False, type_only)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    visit(ast.Module(body=[stmt], type_ignores=[]), False, True)
                for stmt in child.orelse:
                    visit(ast.Module(body=[stmt], type_ignores=[]), module_level, type_only)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    found.append(Import(module, alias.name, child.lineno, module_level, type_only))
            elif isinstance(child, ast.ImportFrom):
                source = _resolve_from(child, module, is_package)
                for alias in child.names:
                    candidate = f"{source}.{alias.name}"
                    target = candidate if candidate in known else source
                    found.append(Import(module, target, child.lineno, module_level, type_only))
            else:
                visit(child, module_level, type_only)

    visit(tree, True, False)
    return found


def _crossing(source: Place, target: Place, imp: Import) -> Optional[str]:
    """Why an import from ``source`` to ``target`` breaks the rules (None: it does not)."""
    if source.room == "door":
        return None
    if (imp.module, imp.target) in FACADE and not imp.module_level:
        return None
    if source.room == "ground":
        if target.room != "ground":
            return f"the ground imports {target.room} ({imp.target})"
        return None
    if target.room == "ground":
        return None
    if target.room != source.room:
        return (
            f"{source.room} imports {target.room} ({imp.target}): products never import each other"
        )
    if target.floor > source.floor:
        return (
            f"{source.room}.{source.part} (floor {source.floor}) imports {imp.target} "
            f"(floor {target.floor}, higher)"
        )
    return None


def layering_violations(root: Path) -> list[str]:
    """One line per import (or module) that breaks the rules, for the package in folder ``root``."""
    package = root.name
    problems: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        source = place_of(module_name(path, root), package)
        if source is None:
            problems.append(f"{rel}: not placed in PRODUCTS, GROUND or DOOR")
            continue
        for imp in imports_of(path, root):
            where = f"{rel}:{imp.line}"
            top = imp.target.split(".")[0]
            if top == package and not imp.type_only:
                target = place_of(imp.target, package)
                if target is None:
                    problems.append(f"{where}: imports {imp.target}, which is not placed")
                else:
                    why = _crossing(source, target, imp)
                    if why:
                        problems.append(f"{where}: {why}")
            if top in HEAVY and imp.module_level and not imp.type_only and source.pure:
                problems.append(f"{where}: pure module imports {top} at module level")
            if top in WIDGET_PACKAGES and not source.may_import_widgets:
                problems.append(f"{where}: imports {top}; only an app floor or explorer.ui may")
        if source.room in PRODUCTS and source.part == "":
            problems += _face_names_elsewhere(path, rel, source.room, package)
    return problems + import_circles(root)


def _face_names_elsewhere(path: Path, rel: Path, product: str, package: str) -> list[str]:
    """A product's face names its modules by string (loaded on first use): each must be its own."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = f"{package}.{product}"
    return [
        f"{rel}:{node.lineno}: the face of {product} names {node.value}, outside its product"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(f"{package}.")
        and not (node.value == own or node.value.startswith(own + "."))
    ]


def import_circles(root: Path) -> list[str]:
    """One line per circle of modules importing each other.

    Type-only imports count too: they cannot fail at run time, but a circle of them means a
    type lives in the wrong module (one that needs what depends on it).
    """
    package = root.name
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        name = module_name(path, root)
        graph.setdefault(name, set())
        for imp in imports_of(path, root):
            if imp.target.split(".")[0] == package and imp.target != name:
                graph[name].add(imp.target)
    return [f"import circle: {' -> '.join(c + [c[0]])}" for c in _circles(graph)]


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_tree_keeps_the_layout():
    problems = layering_violations(PACKAGE_ROOT)
    assert not problems, "layout broken:\n" + "\n".join(problems)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "explorer"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


CLEAN = {
    "errors.py": "",
    "ui/__init__.py": "import anywidget\nimport plotly\nfrom explorer.errors import E\n",
    "pipeline/__init__.py": "def __getattr__(n):\n    from explorer.pipeline.app import w\n",
    "pipeline/schedules/__init__.py": "from explorer.errors import x\n",
    "pipeline/traces/__init__.py": "from explorer.pipeline.schedules import s\n",
    "pipeline/analysis/__init__.py": "from . import check\n",
    "pipeline/analysis/check.py": "from ..traces import t\nfrom explorer import errors\n",
    "pipeline/runtime/__init__.py": "import torch\nfrom explorer.pipeline.analysis import a\n",
    "pipeline/views/__init__.py": "import plotly.graph_objects as go\nfrom explorer.pipeline.runtime import r\n",
    "pipeline/app/__init__.py": "import ipywidgets\nfrom explorer.pipeline.views import v\nfrom explorer.ui import u\n",
    "pipeline/cli/__init__.py": "from explorer.pipeline.app import w\n",
    "xla/hlo/__init__.py": "from explorer.errors import x\n",
    "xla/traces/__init__.py": "from explorer.xla.hlo import h\n",
    "compile/analysis/__init__.py": "from explorer.compile.traces import t\n",
    "compile/traces/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from explorer.compile.runtime import r\n",
    "read.py": "from explorer.pipeline.cli import c\nfrom explorer.xla.traces import t\n",
    "cli.py": "from explorer import read\n",
}


def test_checker_accepts_a_well_laid_out_tree(tmp_path):
    assert layering_violations(_plant(tmp_path, CLEAN)) == []


@pytest.mark.parametrize(
    "name, text, expected",
    [
        (
            "xla/traces/bad.py",
            "from explorer.pipeline.schedules import s\n",
            "products never import each other",
        ),
        (
            "compile/runtime/bad.py",
            "def f():\n    from explorer.xla.hlo import h\n",
            "products never import each other",
        ),
        ("pipeline/views/bad.py", "from explorer.read import r\n", "pipeline imports door"),
        (
            "loading.py",
            "from explorer.pipeline.schedules import s\n",
            "the ground imports pipeline",
        ),
        (
            "processes/bad.py",
            "def f():\n    from explorer.cli import main\n",
            "the ground imports door",
        ),
        (
            "pipeline/traces/bad.py",
            "from explorer.pipeline.analysis import check\n",
            "(floor 2, higher)",
        ),
        ("pipeline/analysis/bad.py", "from ..printout import p\n", "(floor 4, higher)"),
        ("xla/hlo/bad.py", "def f():\n    import explorer.xla.views\n", "(floor 4, higher)"),
        ("pipeline/app/bad.py", "from explorer.pipeline.cli import c\n", "(floor 6, higher)"),
        ("pipeline/traces/bad.py", "import torch\n", "imports torch at module level"),
        ("xla/analysis/bad.py", "from plotly import graph_objects\n", "imports plotly"),
        ("errors.py", "import deepspeed\n", "imports deepspeed"),
        (
            "xla/hlo/bad.py",
            "try:\n    import torch_xla\nexcept ImportError:\n    pass\n",
            "torch_xla",
        ),
        ("pipeline/views/bad.py", "def f():\n    import ipywidgets\n", "only an app floor"),
        ("compile/runtime/bad.py", "def f():\n    import anywidget\n", "only an app floor"),
        ("pipeline/newfloor/__init__.py", "", "not placed"),
        ("newpart.py", "", "not placed"),
        ("pipeline/schedules/a.py", "from explorer.pipeline.schedules import b\n", "import circle"),
        ("xla/__init__.py", "T = {'graphs': 'explorer.compile.views'}\n", "outside its product"),
    ],
    ids=[
        "a-product-imports-another",
        "a-product-imports-another-in-a-function",
        "a-product-imports-the-door",
        "the-ground-imports-a-product",
        "the-ground-imports-the-door-lazily",
        "a-reader-calls-the-analysis",
        "an-analysis-prints-relatively",
        "hlo-imports-views-in-a-function",
        "an-app-imports-its-cli",
        "a-pure-floor-imports-torch",
        "xla-analysis-imports-plotly",
        "errors-imports-deepspeed",
        "hlo-tries-torch_xla",
        "views-imports-ipywidgets-in-a-function",
        "runtime-imports-anywidget-in-a-function",
        "an-unplaced-floor",
        "an-unplaced-part",
        "two-modules-import-each-other",
        "a-face-names-another-products-module",
    ],
)
def test_checker_finds_a_planted_violation(tmp_path, name, text, expected):
    files = {**CLEAN, name: text}
    if name == "pipeline/schedules/a.py":
        files["pipeline/schedules/b.py"] = "from explorer.pipeline.schedules import a\n"
    problems = layering_violations(_plant(tmp_path, files))
    assert len(problems) == 1 and expected in problems[0], problems


def test_checker_allows_heavy_imports_inside_functions_and_for_type_checking(tmp_path):
    lazy = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\n    from explorer.pipeline.runtime import r\n"
        "def f():\n    import torch_xla\n    import plotly\n"
    )
    assert layering_violations(_plant(tmp_path, {**CLEAN, "pipeline/analysis/lazy.py": lazy})) == []


def test_every_module_of_the_package_is_placed():
    unplaced = [
        module_name(p, PACKAGE_ROOT)
        for p in PACKAGE_ROOT.rglob("*.py")
        if place_of(module_name(p, PACKAGE_ROOT), "explorer") is None
    ]
    assert unplaced == []


# The dynamic checks: each starts an interpreter, so they live in the slow tier.


@pytest.mark.slow
@pytest.mark.parametrize(
    "module",
    [
        "explorer.pipeline.schedules",
        "explorer.pipeline.analysis",
        "explorer.pipeline.printout.listing",
        "explorer.compile.traces.torch_trace",
        "explorer.compile.traces.profile",
        "explorer.compile.traces.detect",
        "explorer.detect",
        "explorer.compile.analysis.from_trace",
        "explorer.compile.analysis.ranks",
        "explorer.pipeline.printout.html",
        "explorer.cli",
        "explorer.pipeline.runtime.pipelining_orders",
        "explorer.processes",
        "explorer.failure",
        "explorer",
        "explorer.pipeline.traces.instrumented",
        "explorer.pipeline.runtime.deepspeed.guard",
        "explorer.pipeline.runtime.deepspeed.schedules",
        "explorer.pipeline.runtime.deepspeed.engine",
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
        "import sys, json; from explorer.pipeline.analysis import build, check; check(build('1f1b', 4, 8)); "
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


@pytest.mark.slow
@pytest.mark.parametrize("product", sorted(PRODUCTS))
def test_a_products_face_is_light_and_every_name_it_lists_resolves(product):
    """Importing the face costs nothing heavy; each listed name then loads from its home."""
    code = (
        f"import sys, json, explorer.{product} as face\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "missing = [n for n in face.__all__ if getattr(face, n, None) is None]\n"
        "print(json.dumps([heavy, missing, sorted(dir(face)) == sorted(face.__all__)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [[], [], True]
