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


#: Longest run of characters an error message quotes from a user's input.
EXCERPT_CHARS = 60


def excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    """``repr`` of ``value`` cut to about ``limit`` characters, saying how long the whole was.

    Messages quote what the user gave so they can find it; a 5,000-digit number or a 120 KB
    HLO line must still fit on one terminal line.
    """
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    head, tail = text[: limit * 2 // 3], text[-(limit // 6) :]
    return f"{head!r}...{tail!r} ({len(text):,} characters)"


def one_line(message: str, limit: int = 600) -> str:
    """``message`` on one line (newlines folded), long words shortened, at most ``limit`` characters.

    The CLI's contract is one line on stderr per bad input, whatever text a user's code or
    file put into the message.
    """
    words = []
    for word in " ".join(str(message).split()).split(" "):
        if len(word) > 160:
            word = f"{word[:100]}...{word[-20:]} ({len(word):,} characters)"
        words.append(word)
    text = " ".join(words)
    return (
        text
        if len(text) <= limit
        else text[: limit - 40] + f"... ({len(text):,} characters in all)"
    )


__all__ = ["InputError", "MissingExtraError", "require", "EXCERPT_CHARS", "excerpt", "one_line"]
