"""Load a user's step function from ``MODULE:FUNCTION`` (or ``path/to/file.py:FUNCTION``).

Users bring their own loop: a function ``step(iteration) -> None`` that runs one training
iteration with their compiled model. Loading it is where most CLI mistakes happen, so each
failure names the part of the spec that is wrong.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from explorer.errors import InputError
from explorer.loading import load_ref

#: The ``--step`` example every message quotes.
EXAMPLE = "my_train:step or train.py:step"


def load_step(spec: str) -> Callable[[int], Any]:
    """The callable named by ``spec``; it must accept one positional argument, the iteration."""
    fn = load_ref(spec, "--step", EXAMPLE, files=True, expect="function")
    func_name = spec.rpartition(":")[2]
    try:
        inspect.signature(fn).bind(0)
    except TypeError as exc:
        raise InputError(
            f"--step {spec!r}: {func_name} must accept one argument, the iteration ({exc})"
        ) from exc
    except ValueError:  # builtins without a signature: let the call decide
        pass
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise InputError(
            f"--step {spec!r}: {func_name} is an async def: calling it runs none of its body "
            "(it only makes a coroutine); give a plain def that runs one iteration"
        )
    if inspect.isgeneratorfunction(fn):
        raise InputError(
            f"--step {spec!r}: {func_name} is a generator (it yields): calling it runs none of "
            "its body; give a plain def that runs one iteration"
        )
    return fn


__all__ = ["EXAMPLE", "load_step"]
