"""Read a committed notebook as JSON, for the checks that need no kernel (fast tier).

``nbformat.read`` would do, but importing nbformat imports jsonschema and its format checkers,
about a second and a half of CPU here, which the fast tier would pay for a few dictionary
lookups. The checks read the same fields with the same attribute access (``cell.source`` as
one string, as nbformat joins it); the notebooks that run in a kernel still go through nbformat.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Union

__all__ = ["Node", "read_notebook"]


class Node(dict):
    """A JSON object whose keys read as attributes, like nbformat's ``NotebookNode``."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def read_notebook(path: Union[str, Path]) -> Node:
    """The notebook at ``path`` (format 4), each cell's ``source`` joined into one string."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"), object_hook=Node)
    assert nb.nbformat == 4, f"{path}: notebook format {nb.nbformat}, expected 4"
    for cell in nb.cells:
        if isinstance(cell.source, list):
            cell["source"] = "".join(cell.source)
    return nb
