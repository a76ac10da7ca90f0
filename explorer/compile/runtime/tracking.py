"""Which cached variant ran: count calls of each compiled graph by its compile id.

Dynamo keeps no per-call record of which cache entry matched. When the probe owns the
backend it wraps it: the backend is called once per compile, inside the compile context, so
the compile id (``0/2``) is known there, and the callable it returns is wrapped by a tiny
counter. A graph that never runs in an iteration whose frame hit the recompile limit is
therefore an exact sign of eager fallback. The counter costs one dict update per graph call.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from explorer.compile.traces.records import frame_of


class VariantTracker:
    """Wraps backends and counts, per compile id, how often their graphs ran."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.last: dict[str, str] = {}

    def wrap(self, backend: Callable[..., Any]) -> Callable[..., Any]:
        """A backend that compiles with ``backend`` and counts every call of the result."""
        calls, last = self.calls, self.last

        def tracking_backend(gm: Any, example_inputs: Any, **kwargs: Any) -> Callable[..., Any]:
            from torch._guards import CompileContext

            compile_id = str(CompileContext.current_compile_id() or "?")
            compiled = backend(gm, example_inputs, **kwargs)
            frame = frame_of(compile_id)

            def run(*args: Any) -> Any:
                calls[compile_id] = calls.get(compile_id, 0) + 1
                last[frame] = compile_id
                return compiled(*args)

            return run

        tracking_backend.__name__ = f"tracking_{getattr(backend, '__name__', 'backend')}"
        return tracking_backend

    def snapshot(self) -> dict[str, int]:
        """The call counts now, to diff against after an iteration."""
        return dict(self.calls)

    def ran_since(self, before: Mapping[str, int]) -> dict[str, str]:
        """Frame -> the compile id that ran last in that frame since ``before``."""
        frames = {frame_of(cid) for cid, n in self.calls.items() if n > before.get(cid, 0)}
        return {frame: self.last[frame] for frame in frames}


__all__ = ["VariantTracker"]
