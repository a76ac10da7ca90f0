"""Several ranks' records as one report: the merged records, one summary per rank, and where ranks differ.

A data-parallel job is as slow as its slowest rank (every iteration ends in a gradient
all-reduce that waits for all), and a recompile on one rank stalls all the others; so the
merged iteration takes the slowest rank's time, compiled when any rank compiled, and lists
every variant any rank ran. Compiles are kept once per (compile id, iteration, failure) with
the ranks that made them, and what not every rank did is said in words: "rank 1 compiled 0/3
at iteration 40; ranks 0, 2, 3 did not". The probe's ``--nproc`` runs and a job's traces
both end here. Pure python.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping, Optional

from explorer.compile.analysis.diagnosis import diagnose
from explorer.compile.traces.compiles_only import diagnose_compiles_only
from explorer.compile.traces.records import (
    LIMIT_FAILURE,
    UNKNOWN,
    CompileEvent,
    GraphBreak,
    Iteration,
    ProbeResult,
)


def _who(ranks: Iterable[int]) -> str:
    ranks = sorted(ranks)
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {', '.join(str(r) for r in ranks)}"


def summary(rank: int, result: ProbeResult) -> dict[str, Any]:
    """What one rank did, for the ``ranks`` list of the JSON document."""
    d = result.diagnosis
    extra = result.ranks[0] if result.ranks else {}
    return {
        "rank": rank,
        **extra,
        "ok": result.exit_code == 0,  # this rank's verdict, as the whole document's
        "error": result.error,
        "iterations": len(result.iterations),
        "compiles": [
            {"compile_id": c.compile_id, "iteration": c.iteration, "failed": c.failed}
            for c in result.compiles
        ],
        "graph_breaks": len(result.graph_breaks),
        "period": d.period if d else None,
        "confidence": d.confidence if d else None,
        "cause": d.cause if d else None,
        "diagnosis": d.sentence if d else "",
    }


def divergence(per_rank: Mapping[int, ProbeResult]) -> list[str]:
    """Sentences on compiles not every rank made, or made at different iterations, and on differing verdicts."""
    everyone = set(per_rank)
    at: dict[str, dict[int, set[int]]] = {}
    verb: dict[str, str] = {}
    for rank in sorted(per_rank):
        for c in per_rank[rank].compiles:
            at.setdefault(c.compile_id, {}).setdefault(c.iteration, set()).add(rank)
            verb.setdefault(
                c.compile_id,
                "hit the recompile limit as" if c.failed == LIMIT_FAILURE else "compiled",
            )
    out = []
    for cid, when in at.items():
        who = set().union(*when.values())
        if len(when) == 1 and who == everyone:
            continue
        parts = [
            f"{_who(rs)} {verb[cid]} {cid} "
            + (f"at iteration {it}" if it >= 0 else "(iteration unknown)")
            for it, rs in sorted(when.items())
        ]
        missing = everyone - who
        out.append("; ".join(parts) + (f"; {_who(missing)} did not" if missing else ""))
    verdicts = {
        r: (p.diagnosis.cause, p.diagnosis.period) for r, p in per_rank.items() if p.diagnosis
    }
    if len(set(verdicts.values())) > 1:
        out.append(
            "the ranks' own verdicts differ: "
            + "; ".join(
                f"rank {r} {cause}" + (f", period {k}" if k else "")
                for r, (cause, k) in sorted(verdicts.items())
            )
        )
    return out


def _iterations(per_rank: Mapping[int, ProbeResult]) -> list[Iteration]:
    by_it: dict[int, list[Iteration]] = {}
    for r in sorted(per_rank):
        for it in per_rank[r].iterations:
            by_it.setdefault(it.iteration, []).append(it)
    out = []
    for i in sorted(by_it):
        its = by_it[i]
        fallback: Optional[bool] = (
            True
            if any(it.fallback for it in its)
            else (None if any(it.fallback is None for it in its) else False)
        )
        variants = tuple(dict.fromkeys(v for it in its for v in it.variants))
        slowest = max(its, key=lambda it: it.ms)  # it sets the pace; its clocks go together
        out.append(
            Iteration(
                i,
                slowest.ms,
                any(it.compiled for it in its),
                variants,
                fallback,
                slowest.cpu_ms,
                slowest.waited_ms,
                slowest.synchronized,
            )
        )
    return out


def _compiles(per_rank: Mapping[int, ProbeResult]) -> list[CompileEvent]:
    merged: dict[tuple, CompileEvent] = {}
    for r in sorted(per_rank):
        for c in per_rank[r].compiles:
            key = (c.compile_id, c.iteration, c.failed)
            seen = merged.get(key)
            merged[key] = (
                replace(c, ranks=(r,)) if seen is None else replace(seen, ranks=seen.ranks + (r,))
            )
    return sorted(
        merged.values(), key=lambda c: c.iteration if c.iteration != UNKNOWN else float("inf")
    )


def _breaks(per_rank: Mapping[int, ProbeResult]) -> list[GraphBreak]:
    merged: dict[tuple[str, str], GraphBreak] = {}
    for r in sorted(per_rank):
        for g in per_rank[r].graph_breaks:
            key = (g.reason, g.detail)
            seen = merged.get(key)
            ids = g.compile_ids or ((g.compile_id,) if g.compile_id else ())
            merged[key] = (
                replace(g, ranks=(r,), compile_ids=ids)
                if seen is None
                else replace(
                    seen,
                    ranks=tuple(sorted(set(seen.ranks) | {r})),
                    compile_ids=tuple(dict.fromkeys(seen.compile_ids + ids)),
                )
            )
    return list(merged.values())


def merge_ranks(per_rank: Mapping[int, ProbeResult], label: str = "") -> ProbeResult:
    """One report over every rank (see the module docstring); a single rank comes back with its summary."""
    if not per_rank:
        raise ValueError("merge_ranks needs at least one rank")
    first = per_rank[min(per_rank)]
    if len(per_rank) == 1:
        rank = min(per_rank)
        return replace(
            first,
            compiles=[replace(c, ranks=(rank,)) for c in first.compiles],
            label=label or first.label,
            ranks=[summary(rank, first)],
            divergence=[],
            notes=list(first.notes),
        )
    guards, seen = [], set()
    for r in sorted(per_rank):
        for v in per_rank[r].guards:
            if (v.compile_id, v.only_here) not in seen:
                seen.add((v.compile_id, v.only_here))
                guards.append(v)
    failed = [(r, p.failure) for r, p in sorted(per_rank.items()) if p.failure is not None]
    notes = list(dict.fromkeys(n for r in sorted(per_rank) for n in per_rank[r].notes))
    merged = ProbeResult(
        iterations=_iterations(per_rank),
        compiles=_compiles(per_rank),
        graph_breaks=_breaks(per_rank),
        guards=guards,
        backend=first.backend,
        source=first.source,
        variant_source=first.variant_source,
        recompile_limit=next(
            (p.recompile_limit for p in per_rank.values() if p.recompile_limit is not None), None
        ),
        label=label or f"{len(per_rank)} ranks",
        failure=replace(
            failed[0][1],
            rank=failed[0][0],
            message=f"rank {failed[0][0]}: {failed[0][1].message}",
            consequences=tuple(f"rank {r}: {f.message}" for r, f in failed[1:]),
        )
        if failed
        else None,
        ranks=[summary(r, per_rank[r]) for r in sorted(per_rank)],
        divergence=divergence(per_rank),
        notes=notes,
    )
    if merged.iterations:
        merged.notes.append(
            "an iteration's time is the slowest rank's: data-parallel ranks wait for each other every "
            "iteration, so one rank's recompile or slow step stalls them all."
        )
    d = diagnose(merged) if merged.iterations else diagnose_compiles_only(merged)
    if merged.divergence:
        more = f" (and {len(merged.divergence) - 1} more)" if len(merged.divergence) > 1 else ""
        d = replace(d, sentence=f"{d.sentence} Ranks differ: {merged.divergence[0]}{more}.")
    merged.diagnosis = d
    return merged


__all__ = ["summary", "divergence", "merge_ranks"]
