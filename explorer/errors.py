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


def import_user_module(module_name: str, option: str):
    """Import a user's module for ``option`` (``--from``, ``--model``, ``--step``, a backend path).

    Whatever importing it raises - ``ImportError``, a ``SyntaxError`` in the file, any exception
    its top level throws, even ``sys.exit`` - is the user's input to fix, so it becomes one
    :class:`InputError` naming the option, the module and the first line of the cause.
    """
    import importlib

    if (
        not module_name
        or module_name.startswith(".")
        or not all(p.isidentifier() for p in module_name.split("."))
    ):
        raise InputError(
            f"{option}: {excerpt(module_name)} is not a module name: write MODULE:NAME with MODULE "
            "a dotted Python module name on PYTHONPATH, e.g. my_pkg.schedules"
        )
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(
            f"{option}: cannot import module {excerpt(module_name)} ({_first_line(exc)}); "
            "is it on PYTHONPATH?"
        ) from None
    except SyntaxError as exc:
        where = f"{exc.filename}:{exc.lineno}" if exc.filename else module_name
        raise InputError(
            f"{option}: module {excerpt(module_name)} has a syntax error at {where} ({exc.msg}): "
            "fix the file"
        ) from None
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # its top level ran and failed
        raise InputError(
            f"{option}: importing module {excerpt(module_name)} raised {type(exc).__name__}: "
            f"{_first_line(exc)}; fix the module's top-level code"
        ) from None


def _first_line(exc: BaseException) -> str:
    """The first line of an exception's message, at most 200 characters."""
    lines = str(exc).strip().splitlines()
    line = lines[0] if lines else "no message"
    return line if len(line) <= 200 else line[:180] + f"... ({len(line):,} characters)"
