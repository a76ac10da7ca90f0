"""Errors a user can fix.

Every bad input (zero stages, an unknown schedule kind, a malformed HLO line, a backend that
cannot be imported) raises :class:`InputError` with one sentence that names the constraint,
quotes the numbers and says what to change. The CLI prints it and exits 2 without a
traceback; notebooks show the same sentence.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input from a user: the message names the constraint and what to change."""


class MissingExtraError(ImportError):
    """An optional dependency is missing: the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed: "
            f"run `pip install -e .[{extra}]` (or `make install`)."
        )
        self.package = package
        self.extra = extra


def require(module: str, extra: str, purpose: str):
    """Import an optional module or raise :class:`MissingExtraError` naming its extra."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingExtraError(module.split(".")[0], extra, purpose) from exc
