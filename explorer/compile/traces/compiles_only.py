"""The verdict when only compiles are known: a ``TORCH_TRACE`` read without a profiler trace.

The four causes of :mod:`diagnosis` are told apart by iterations (when compiles happen, which
variant runs, how long each takes), which the structured trace does not record. What it does
record still decides two things: a frame that hit ``recompile_limit`` (from then on, inputs
that match no cached variant run eagerly) and recompiles with the guards that failed. The
sentence says what is known, and that the period cannot be. Pure python.
"""

from __future__ import annotations

from collections import Counter

from explorer.compile.traces.records import LIMIT_FAILURE, CompileEvent, Diagnosis, ProbeResult

UNKNOWABLE = (
    " Which iterations compiled, which cached variant ran in each, and any period cannot be known "
    "without iteration records (see the notes)."
)


def _guard_text(c: CompileEvent) -> list[str]:
    """Every failed guard of a recompile, without the ``0/1:`` prefix and the source comment."""
    out = []
    for reason in c.reasons or ((c.reason,) if c.reason else ()):
        one = CompileEvent(c.compile_id, c.iteration, reason=reason)
        if one.guard:
            out.append(one.guard)
    return out


def _names(events: list[CompileEvent]) -> str:
    return ", ".join(sorted({f"'{e.function}'" for e in events if e.function})) or "a frame"


def diagnose_compiles_only(result: ProbeResult) -> Diagnosis:
    """``eager-fallback``, ``recompiles`` or ``steady``, never with a period (see the module docstring)."""
    limits = [c for c in result.compiles if c.failed == LIMIT_FAILURE]
    recompiles = [c for c in result.compiles if not c.failed and (c.reasons or c.reason)]
    breaks = sorted({g.reason for g in result.graph_breaks})
    if limits:
        frames = {c.frame for c in limits}
        variants = [c for c in result.compiles if c.frame in frames and not c.failed]
        guards = list(dict.fromkeys(g for c in limits for g in _guard_text(c)))
        shown = ", ".join(f"`{g}`" for g in guards[:4]) + (", ..." if len(guards) > 4 else "")
        sentence = (
            f"Eager fallback after the recompile limit: {_names(variants)} compiled {len(variants)} variants, "
            f"then {limits[0].compile_id} hit config.recompile_limit; from then on inputs that match no "
            f"cached variant run uncompiled. The guards that failed there: {shown or 'not recorded'}. "
            "Raise torch._dynamo.config.recompile_limit or stop the guarded value from changing."
        )
        return Diagnosis("eager-fallback", None, sentence + UNKNOWABLE)
    if recompiles:
        guards = Counter(g for c in recompiles for g in _guard_text(c)[:1])
        top = ", ".join(f"`{g}`" for g, _ in guards.most_common(3))
        sentence = (
            f"{len(recompiles)} recompile{'s' if len(recompiles) != 1 else ''} of {_names(recompiles)} "
            f"({', '.join(c.compile_id for c in recompiles[:8])}{', ...' if len(recompiles) > 8 else ''}), "
            f"each because a guard failed, e.g. {top}."
        )
        return Diagnosis("recompiles", None, sentence + UNKNOWABLE)
    named = f" ({'; '.join(breaks[:2])})" if breaks else ""
    sentence = (
        f"No recompile: {len(result.compiles)} compile{'s' if len(result.compiles) != 1 else ''}, "
        f"{len(breaks)} distinct graph break{'s' if len(breaks) != 1 else ''}{named}."
    )
    return Diagnosis("steady", None, sentence + UNKNOWABLE)


__all__ = ["UNKNOWABLE", "diagnose_compiles_only"]
