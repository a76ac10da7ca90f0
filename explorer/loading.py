"""One loader for every ``MODULE:NAME`` a user names (``--from``, ``--model``, ``--step``, a backend).

Every option that points at a user's code goes through :func:`load_ref`, so each failure has
the same wording wherever it happens: the option and what the user gave, then the part that is
wrong (the shape, the module, the file, the attribute, the kind of object) and what to change.
:func:`split_ref` is the shape check alone; argparse types and configs run it before any
process starts, so a typo costs milliseconds and imports nothing.

The attribute is looked up with the standard library's :func:`pkgutil.resolve_name` (which also
walks ``Class.method``). The module is imported first by :func:`import_user_module`, for two
reasons: ``resolve_name`` lets whatever the import raises escape unchanged, and an
``AttributeError`` from a module's top-level code would otherwise read as a missing name.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import sys
from typing import Any, Literal

from explorer.errors import InputError, excerpt

#: What the object a reference names must be: anything, or something callable.
Expect = Literal["any", "callable", "function"]

#: Characters of a reference a message quotes: a whole file path, but not a 5,000-character typo.
QUOTE_CHARS = 160

__all__ = ["Expect", "import_user_module", "load_ref", "split_ref"]


def split_ref(
    spec: str,
    option: str,
    example: str,
    what: str = "MODULE:FUNCTION",
    *,
    dotted: bool = False,
    files: bool = False,
) -> tuple[str, str]:
    """``(module, name)`` from ``MODULE:NAME``, or :class:`InputError` saying which part is wrong.

    ``dotted`` reads ``pkg.module.name`` instead (the form DeepSpeed uses for a backend);
    ``files`` also accepts ``path/to/file.py:NAME`` and checks that the file exists.
    """
    text = spec if isinstance(spec, str) else str(spec)
    module, sep, attr = text.strip().rpartition("." if dotted else ":")
    shown = f"{option} {excerpt(text, QUOTE_CHARS)}"
    if not sep or not module.strip() or not attr.strip():
        raise InputError(f"{shown}: expected {what}, e.g. {example}")
    if not all(part.isidentifier() for part in attr.split(".")):
        raise InputError(
            f"{shown}: {excerpt(attr)} is not a Python name; expected {what}, e.g. {example}"
        )
    is_file = files and module.endswith(".py")
    if not is_file and not all(part.isidentifier() for part in module.split(".")):
        raise InputError(
            f"{shown}: {excerpt(module)} is not a module name; expected {what}, e.g. {example}"
        )
    if is_file and not os.path.isfile(module):
        raise InputError(f"{shown}: file {excerpt(module, QUOTE_CHARS)} does not exist")
    return module, attr


def load_ref(
    spec: str,
    option: str,
    example: str,
    what: str = "MODULE:FUNCTION",
    *,
    dotted: bool = False,
    files: bool = False,
    expect: Expect = "any",
) -> Any:
    """The object ``spec`` names, imported; every failure is one :class:`InputError`.

    ``expect="callable"`` refuses an object that cannot be called, ``"function"`` says so in
    the words a ``--step`` user expects. Files (``train.py:step``) are run under a module name
    of their own, so two files of the same name in different folders do not collide with a
    module a user already imported.
    """
    module_name, attr = split_ref(spec, option, example, what, dotted=dotted, files=files)
    shown = f"{option} {excerpt(spec, QUOTE_CHARS)}"
    if files and module_name.endswith(".py"):
        import_name = _import_file(module_name, shown)
    else:
        if files and os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())  # `--step train:step` run from the script's folder
        import_name = import_user_module(module_name, shown).__name__
    try:
        value = pkgutil.resolve_name(f"{import_name}:{attr}")
    except AttributeError:
        raise InputError(
            f"{shown}: module {excerpt(module_name, QUOTE_CHARS)} has no attribute {excerpt(attr)}"
        ) from None
    if expect != "any" and not callable(value):
        kind = "a function" if expect == "function" else "a callable"
        raise InputError(f"{shown}: {excerpt(attr)} is a {type(value).__name__}, not {kind}")
    return value


def _import_file(path: str, shown: str) -> str:
    """Run ``path`` as a module registered in ``sys.modules``; return the name it got."""
    stem = re.sub(r"\W", "_", os.path.splitext(os.path.basename(path))[0])
    name = "explorer_user_step_" + stem
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise InputError(f"{shown}: {excerpt(path, QUOTE_CHARS)} cannot be loaded as a Python file")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    try:
        loader_spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise InputError(
            f"{shown}: {path} has a syntax error at line {exc.lineno} ({exc.msg}): fix the file"
        ) from None
    except (Exception, SystemExit, KeyboardInterrupt) as exc:  # its top level ran and failed
        sys.modules.pop(name, None)
        raise InputError(
            f"{shown}: running {path} raised {type(exc).__name__}: {_first_line(exc)}; "
            "fix its top-level code"
        ) from None
    return name


def import_user_module(module_name: str, option: str) -> Any:
    """Import a user's module for ``option`` (``--from``, ``--model``, ``--step``, a backend path).

    Whatever importing it raises - ``ImportError``, a ``SyntaxError`` in the file, any exception
    its top level throws, even ``sys.exit`` - is the user's input to fix, so it becomes one
    :class:`InputError` naming the option, the module and the first line of the cause.
    """
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
