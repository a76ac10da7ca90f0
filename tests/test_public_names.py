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
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name):
                return _face_table(tree, value)  # a product's face: sorted(_TABLE)
            return [ast.literal_eval(e) for e in value.elts]  # type: ignore[union-attr]
    return None


def _face_table(tree: ast.Module, call: ast.Call) -> list[str]:
    """The keys of the dict literal a face's ``__all__ = sorted(_TABLE)`` sorts (its lazy names)."""
    assert call.func.id == "sorted" and isinstance(call.args[0], ast.Name), ast.dump(call)  # type: ignore[attr-defined]
    name = call.args[0].id
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            assert isinstance(node.value, ast.Dict), f"{name} must be a dict literal"
            return [ast.literal_eval(k) for k in node.value.keys if k is not None]
    raise AssertionError(f"no {name} in the module")


def _is_face_all(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
        and isinstance(node.value, ast.Call)
    )


@pytest.mark.parametrize("path", _public_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_public_module_declares_all(path: Path) -> None:
    rel = str(path.relative_to(PACKAGE))
    tree = ast.parse(path.read_text())
    exports = _exports(tree)
    assert exports is not None, f"{rel} has no __all__"
    bound = _bound_names(tree)
    if any(_is_face_all(n) for n in tree.body):
        bound |= set(exports)  # loaded on first use; tests/test_layering.py resolves each one
    missing = sorted(set(exports) - bound)
    assert not missing, f"{rel}: __all__ names what the module does not define: {missing}"
    assert len(exports) == len(set(exports)), f"{rel}: __all__ repeats a name"


def test_notebooks_import_only_from_a_products_public_face() -> None:
    """A notebook teaches the names a user imports: ``from explorer.pipeline import check``,
    never a CLI module, a private name or a module path that the next move of a file breaks."""
    import json

    import explorer.compile
    import explorer.pipeline
    import explorer.xla

    faces = {
        "explorer.pipeline": set(explorer.pipeline.__all__),
        "explorer.xla": set(explorer.xla.__all__),
        "explorer.compile": set(explorer.compile.__all__),
    }
    wrong = []
    for path in sorted((PACKAGE.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for cell in (c for c in cells if c["cell_type"] == "code"):
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("explorer"):
                    names = {a.name for a in node.names}
                    if node.module not in faces or not names <= faces[node.module]:
                        wrong.append(
                            f"{path.name}: from {node.module} import {', '.join(sorted(names))}"
                        )
                elif isinstance(node, ast.Import):
                    wrong += [
                        f"{path.name}: import {a.name}"
                        for a in node.names
                        if a.name.startswith("explorer.")
                    ]
    assert wrong == []
