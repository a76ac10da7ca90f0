"""Every public module of the package says what it exports, and exports only names it has."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "explorer"


def _public_modules() -> list[Path]:
    return sorted(
        p for p in PACKAGE.rglob("*.py") if p.name == "__init__.py" or not p.name.startswith("_")
    )


def _bound_names(tree: ast.Module) -> set[str]:
    """Names the module binds: definitions, assignments, imports, and lazy ``__getattr__`` names."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "__getattr__":
            names.update(
                c.value
                for c in ast.walk(node)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            )
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _exports(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            return [ast.literal_eval(e) for e in node.value.elts]  # type: ignore[union-attr]
    return None


@pytest.mark.parametrize("path", _public_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_module_declares_all(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    tree = ast.parse(path.read_text())
    exports = _exports(tree)
    assert exports is not None, f"{rel} has no __all__"
    missing = sorted(set(exports) - _bound_names(tree))
    assert not missing, f"{rel}: __all__ names what the module does not define: {missing}"
    assert len(exports) == len(set(exports)), f"{rel}: __all__ repeats a name"
