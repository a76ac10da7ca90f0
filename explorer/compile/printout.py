"""The compile product's text reports: what ``compile-probe`` and ``explorer read`` print.

Plain text from a :class:`ProbeResult`, so the CLI, a notebook and a test print the same words;
a job of many ranks read folded (:class:`CompileJob`) has its own text and JSON document, which
name groups of ranks by folded ranges.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from explorer.compile.analysis.fold import StoryGroup, differences, ranges, stall, told, who
from explorer.compile.analysis.job import CompileJob
from explorer.compile.analysis.story import RankStory
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
    """The probe's report plus the trace's own findings (see the module docstring), and how the
    run ended where it did not finish clean: its diagnosis speaks of the iterations recorded."""
    lines = [probe_report(result)]
    if result.failure is not None:
        ended = "unfinished" if result.failure.kind == "unfinished" else "failed"
        lines.append(f"{ended}: {result.failure.message}")
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


#: The most reasons a text report lists ranks not read in full for (``--json`` has them all).
MOST_REASONS = 10


def _unread_lines(job: CompileJob) -> list[str]:
    """The ranks not read in full, folded by why (an interrupted read names one range)."""
    by_why: dict[str, list[int]] = {}
    for u in job.unread:
        by_why.setdefault(u.sentence(), []).append(u.rank)
    lines = [f"{who(ranks)}: {why}" for why, ranks in list(by_why.items())[:MOST_REASONS]]
    rest = sum(len(rs) for rs in list(by_why.values())[MOST_REASONS:])
    if rest:
        lines.append(
            f"{rest} more ranks for {len(by_why) - MOST_REASONS} other reasons (see --json)"
        )
    return lines


def _seconds(g: StoryGroup) -> str:
    median, slowest = g.median_seconds, g.slowest
    if median is None or slowest is None:
        return ""
    return f"; compile time median {median:.3g} s, most {slowest[0]:.3g} s (rank {slowest[1]})"


def _verdict(story: RankStory) -> str:
    period = f", period {story.period} ({story.confidence})" if story.period else ""
    return f"{story.cause}{period}"


def divergence_lines(job: CompileJob) -> list[str]:
    """One sentence per group that is not the majority: who, and what they did differently."""
    everyone = [r for g in job.groups for r in g.ranks]
    first = job.majority
    out = []
    for g in job.groups[1:]:
        said = "; ".join(differences(g.story, first.story))
        cost = stall(g, first)
        out.append(f"{who(g.ranks, everyone)} {said}" + (f"; {cost}" if cost else ""))
    return out


def job_sentence(job: CompileJob) -> str:
    """The job's verdict: the majority's, and which ranks compiled otherwise (said above them)."""
    d = job.majority.story.sentence
    others = [r for g in job.groups[1:] for r in g.ranks]
    if others:
        groups = len(job.groups) - 1
        d = (
            f"{d} Ranks differ: {len(others)} of {job.read} ranks compiled otherwise than the "
            f"majority ({who(others)}{f', in {groups} groups' if groups > 1 else ''})."
        )
    return d


def job_report(job: CompileJob) -> str:
    """``explorer read``'s text for a folded job: the majority once, each outlier group by what
    sets it apart, the ranks not read, the notes. Never a list of every rank."""
    everyone = [r for g in job.groups for r in g.ranks]
    first = job.majority
    lines = [
        f"{job.path}: TORCH_TRACE of {job.ranks} ranks, {job.read} read in {job.seconds:.1f} s "
        f"({job.workers} process{'es' if job.workers > 1 else ''}); {len(job.groups)} "
        f"compile stor{'ies' if len(job.groups) > 1 else 'y'}"
    ]
    lines.append(
        f"{who(first.ranks, everyone)} ({len(first.ranks)} ranks): {told(first.story)}"
        f"{_seconds(first)}; {_verdict(first.story)}"
    )
    lines += divergence_lines(job)
    lines.append(job_sentence(job))
    if job.interrupted:
        lines.append("interrupted (Ctrl-C): the ranks read before it are folded above")
    lines += [f"not read in full: {line}" for line in _unread_lines(job)]
    lines += [f"note: {n}" for n in job.notes]
    return "\n".join(lines)


def job_document(job: CompileJob) -> dict[str, Any]:
    """``--json`` for a folded job: groups with their rank ranges, the majority first."""
    first = job.majority.story
    groups = []
    for i, g in enumerate(job.groups):
        slowest = g.slowest
        groups.append(
            {
                "ranks": [list(r) for r in ranges(g.ranks)],
                "count": len(g.ranks),
                "compiles": [c.what_json() for c in g.story.compiles],
                "graph_breaks": [{"reason": b.reason, "detail": b.detail} for b in g.story.breaks],
                "iterations": g.story.iterations,
                "cause": g.story.cause,
                "period": g.story.period,
                "confidence": g.story.confidence,
                "diagnosis": g.story.sentence,
                "compile_seconds": None
                if slowest is None
                else {"median": g.median_seconds, "max": slowest[0], "max_rank": slowest[1]},
                "differs": [] if i == 0 else differences(g.story, first),
            }
        )
    unread: dict[str, list[int]] = {}
    for u in job.unread:
        unread.setdefault(u.sentence(), []).append(u.rank)
    return {
        "kind": "compile",
        "source": "TORCH_TRACE",
        "path": str(job.path),
        "folded": True,
        "ranks": job.ranks,
        "read": job.read,
        "workers": job.workers,
        "seconds": round(job.seconds, 3),
        "interrupted": job.interrupted,
        "cause": first.cause,
        "period": first.period,
        "confidence": first.confidence,
        "diagnosis": job_sentence(job),
        "groups": groups,
        "divergence": divergence_lines(job),
        "unread": [
            {"ranks": [list(r) for r in ranges(rs)], "why": why} for why, rs in unread.items()
        ],
        "notes": job.notes,
    }


__all__ = [
    "divergence_lines",
    "job_document",
    "job_report",
    "job_sentence",
    "probe_report",
    "trace_report",
]
