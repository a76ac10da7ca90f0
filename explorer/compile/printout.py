"""The compile product's text reports: what ``compile-probe`` and ``explorer read`` print.

Plain text from a :class:`ProbeResult`, so the CLI, a notebook and a test print the same words.
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from explorer.compile.traces.records import ProbeResult


def probe_report(result: ProbeResult) -> str:
    """``compile-probe``'s text: iterations, compiles, graph breaks, the diagnosis, ranks, notes."""
    lines = [
        f"{result.label}: backend {result.backend or '(the step’s own)'}, records from Dynamo {result.source}"
    ]
    lines.append(" it      ms  compiled  variant")
    for it in result.iterations:
        flag = " fallback" if it.fallback else ""
        lines.append(
            f"{it.iteration:3d} {it.ms:9.2f}  {'yes' if it.compiled else '   '}       {it.variant or '-'}{flag}"
        )
    for c in result.compiles:
        why = c.guard or ("first compile" if not c.failed else "")
        ranks = f" on {_ranks(c.ranks)}" if len(result.ranks) > 1 else ""
        lines.append(
            f"compile {c.compile_id} {_at(c.iteration)}{ranks} ({c.function or '?'}): "
            f"{c.failed + ': ' if c.failed and why else c.failed or ''}{why}"
        )
    for g in result.graph_breaks:
        lines.append(f"graph break {g.compile_id or ''} {_at(g.iteration)}: {g.reason}")
    if result.diagnosis:
        lines.append(result.diagnosis.sentence)
    for r in result.ranks if len(result.ranks) > 1 else ():
        lines.append(
            f"rank {r['rank']}: {len(r['compiles'])} compiles, {r['iterations']} iterations; {r['cause']}"
            + (f", period {r['period']} ({r['confidence']})" if r["period"] else "")
        )
    lines += [f"ranks differ: {d}" for d in result.divergence]
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def _at(iteration: int) -> str:
    return f"at iteration {iteration}" if iteration >= 0 else "at an unknown iteration"


def _ranks(ranks: Sequence[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def trace_report(result: ProbeResult) -> str:
    """The probe's report plus the trace's own findings (see the module docstring)."""
    lines = [probe_report(result)]
    for c in result.compiles:
        if len(c.reasons) > 1:
            lines.append(
                f"guards that failed before {c.compile_id} (one per cached variant tried):"
            )
            lines += [f"  {r.split('#', 1)[0].strip()}" for r in c.reasons]
    cache = Counter(name for c in result.compiles for name in c.cache)
    if cache:
        lines.append(
            "compile caches: " + ", ".join(f"{n} {name}" for name, n in sorted(cache.items()))
        )
    seconds = [c.seconds for c in result.compiles if c.seconds is not None]
    if seconds:
        lines.append(
            f"compile time: {sum(seconds):.3g} s over {len(seconds)} compiles (longest {max(seconds):.3g} s)"
        )
    return "\n".join(lines)


__all__ = ["probe_report", "trace_report"]
