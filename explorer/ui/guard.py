"""Exceptions in widget callbacks said in words on the page, not only in JupyterLab's Log Console.

A callback's traceback goes to the Log Console, where nobody looks; every explorer wraps its
callbacks with :func:`guarded` so the failure lands in its own status line instead.
"""

from __future__ import annotations

from typing import Any, Callable


def guarded(doing: str, fn: Callable[..., Any], say: Callable[[str], None]) -> Callable[..., Any]:
    """``fn`` with any exception turned into ``say("while <doing>: Type: message")``."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the point is to catch what a callback raises
            say(f"while {doing}: {type(exc).__name__}: {exc}")
            return None

    return call


__all__ = ["guarded"]
