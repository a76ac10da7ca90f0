"""A folded job as text and as the ``--json`` document of ``explorer read JOB_DIR``.

The text fits a screen at any number of ranks: what could not be read, the named outliers with
the rule that named them and what each costs the step, the slowest replica's critical path and
whether each outlier is on it, then one line per stage and instruction kind (the band across
replicas over all its micro-batches), then the clocks (each rank's offset bounds, the largest
skew). The JSON holds every band per micro-batch and every rank's offset bounds.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Optional

import numpy as np

from explorer.pipeline.analysis.clocks import Clocks
from explorer.pipeline.analysis.fold import Band, Fold
from explorer.pipeline.analysis.fold_path import FoldedPath
from explorer.pipeline.analysis.step_cost import StepCosts
from explorer.pipeline.traces.job import JobTrace

#: Unread ranks listed one by one in the text; the rest are counted.
SHOWN_UNREAD = 20


def job_document(
    job: JobTrace,
    folded: Fold,
    seconds: float,
    clocks: Optional[Clocks] = None,
    costs: Optional[StepCosts] = None,
    path: Optional[FoldedPath] = None,
) -> dict:
    """The ``--json`` document (``kind: "pipeline-job"``)."""
    lay = job.layout
    return {
        "kind": "pipeline-job",
        "folder": str(lay.folder),
        "run": lay.run,
        "ranks": lay.ranks,
        "pipeline_ranks": lay.pipeline_ranks,
        "stages": lay.stages,
        "replicas": lay.replicas,
        "layout": lay.numbering(),
        "instructions": len(job),
        "decoder": job.decoder,
        "seconds": round(seconds, 3),
        "interrupted": job.interrupted,
        "unread": [
            {"rank": u.rank, "why": u.why, "kept": u.kept} for u in job.unread if not u.ended
        ],
        # ranks read in full that failed or wrote no end: the job did not run to its end
        "not_ended": [
            {"rank": u.rank, "why": u.why, "instructions": u.kept} for u in job.unread if u.ended
        ],
        "rule": folded.rule.sentence(),
        "outliers": [o.to_dict() for o in folded.outliers],
        "bands": [b.to_dict() for b in folded.bands],
        "clocks": None if clocks is None else clocks.to_dict(),
        "step_costs": None if costs is None else costs.to_dict(),
        "critical_path": None if path is None else path.to_dict(),
    }


def _per_kind(bands: Iterable[Band]) -> list[tuple[int, str, float, float, float, int]]:
    """Per (stage, kind): lowest low, median of the micro-batches' medians, highest high."""
    groups: dict[tuple[int, int], list[Band]] = defaultdict(list)
    for b in bands:
        groups[b.stage, int(b.kind)].append(b)
    rows = []
    for (stage, _), bs in sorted(groups.items()):
        top = max(bs, key=lambda b: b.high)
        rows.append(
            (
                stage,
                bs[0].kind.code,
                min(b.low for b in bs),
                float(np.median([b.median for b in bs])),
                top.high,
                top.slowest_rank,
            )
        )
    return rows


def _disagreement(costs: Optional[StepCosts], path: FoldedPath) -> list[str]:
    """Said when the simulated deciding replica is not the slowest one measured: both are shown,
    and which is which, rather than one verdict silently contradicting the other."""
    top = costs.deciding if costs is not None else None
    if top is None or top.cost_ms <= 0 or top.outlier.replica == path.replica:
        return []
    return [
        f"  the simulation puts the job's step on replica {top.outlier.replica} (rank "
        f"{top.outlier.rank}), but replica {path.replica} took longest as measured: the "
        "measured step holds more than the named stragglers (jitter, or a slowness the rule "
        "does not name)"
    ]


def job_text(
    job: JobTrace,
    folded: Fold,
    seconds: float,
    clocks: Optional[Clocks] = None,
    costs: Optional[StepCosts] = None,
    path: Optional[FoldedPath] = None,
) -> str:
    """The report ``explorer read JOB_DIR`` prints."""
    lay = job.layout
    read = lay.ranks - sum(1 for u in job.unread if u.kept == 0 and not u.ended)
    unread = [u for u in job.unread if not u.ended]
    ended = [u for u in job.unread if u.ended]
    lines = [
        f"job {lay.run or '(no run id)'}: {lay.ranks} ranks = {lay.replicas} replicas x "
        f"{lay.pipeline_ranks} pipeline ranks ({lay.stages} stages); {len(job):,} instructions "
        f"of {read} ranks read in {seconds:.1f} s ({job.decoder})"
    ]
    if job.interrupted:
        lines.append("interrupted: the ranks read before Ctrl-C are folded below")
    for said, ranks in (
        ("{} rank(s) did not run to the end", ended),
        ("could not read {} rank(s) in full", unread),
    ):
        if ranks:
            lines.append(said.format(len(ranks)) + ":")
            lines += [f"  {u.sentence()}" for u in ranks[:SHOWN_UNREAD]]
            if len(ranks) > SHOWN_UNREAD:
                lines.append(f"  ... and {len(ranks) - SHOWN_UNREAD} more (--json lists them all)")
    lines.append(f"outliers: {len(folded.outliers) or 'none'} ({folded.rule.sentence()})")
    lines += [f"  {o.sentence()}" for o in folded.outliers]
    if costs is not None:
        lines += costs.sentences()
    if path is not None:
        lines += path.sentences(tuple(o.rank for o in folded.outliers))
        lines += _disagreement(costs, path)
    lines.append("per stage and instruction, across replicas: min / median / max ms (slowest rank)")
    for stage, code, low, med, high, rank in _per_kind(folded.bands):
        lines.append(
            f"  stage {stage:>3} {code:<3} {low * 1e3:9.3f} {med * 1e3:9.3f} {high * 1e3:9.3f}  (rank {rank})"
        )
    if clocks is not None:
        lines += clocks.sentences()
    return "\n".join(lines)


__all__ = ["job_document", "job_text"]
