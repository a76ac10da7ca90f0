"""Load a user's step function from ``MODULE:FUNCTION`` (or ``path/to/file.py:FUNCTION``).

Users bring their own loop: a function ``step(iteration) -> None`` that runs one training
iteration with their compiled model. Loading it is where most CLI mistakes happen, so each
failure names the part of the spec that is wrong.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from typing import Any, Callable

from explorer.errors import InputError, import_user_module


def load_step(spec: str) -> Callable[[int], Any]:
    """The callable named by ``spec``; it must accept one positional argument, the iteration."""
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise InputError(
            f"--step {spec!r}: expected MODULE:FUNCTION, e.g. my_train:step or train.py:step"
        )
    if module_name.endswith(".py"):
        if not os.path.isfile(module_name):
            raise InputError(f"--step {spec!r}: file {module_name!r} does not exist")
        name = "explorer_user_step_" + os.path.splitext(os.path.basename(module_name))[0]
        loader_spec = importlib.util.spec_from_file_location(name, module_name)
        module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
        sys.modules[name] = module
        try:
            loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
        except SyntaxError as exc:
            raise InputError(
                f"--step {spec!r}: {module_name} has a syntax error at line {exc.lineno} ({exc.msg})"
            ) from None
        except (Exception, SystemExit, KeyboardInterrupt) as exc:  # its top level ran and failed
            raise InputError(
                f"--step {spec!r}: running {module_name} raised {type(exc).__name__}: "
                f"{str(exc)[:200]}; fix its top-level code"
            ) from None
    else:
        if os.getcwd() not in sys.path and "" not in sys.path:
            sys.path.insert(0, os.getcwd())
        module = import_user_module(
            module_name, f"--step {spec!r}"
        )  # ImportError, SyntaxError, anything
    fn = getattr(module, func_name, None)
    if fn is None:
        raise InputError(f"--step {spec!r}: module {module_name!r} has no attribute {func_name!r}")
    if not callable(fn):
        raise InputError(f"--step {spec!r}: {func_name!r} is a {type(fn).__name__}, not a function")
    try:
        inspect.signature(fn).bind(0)
    except TypeError as exc:
        raise InputError(
            f"--step {spec!r}: {func_name} must accept one argument, the iteration ({exc})"
        ) from exc
    except ValueError:  # builtins without a signature: let the call decide
        pass
    return fn
