"""A package's public face that imports nothing until a name is used.

``from explorer.pipeline import check`` should cost what ``check`` costs, not what the app
and the engines cost; and ``import explorer.pipeline`` should cost nothing. Each product's
``__init__`` lists its public names with the module that defines each, and :func:`exports`
turns that table into the module's ``__getattr__`` and ``__dir__`` (PEP 562).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping, Union

#: A public name's home: ``"module"`` (same name there) or ``("module", "name there")``.
Home = Union[str, tuple[str, str]]


def exports(
    package: str, table: Mapping[str, Home]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, loading each name of ``table`` on first use."""

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = (home, name) if isinstance(home, str) else home
        return getattr(importlib.import_module(module), attribute)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__


__all__ = ["Home", "exports"]
