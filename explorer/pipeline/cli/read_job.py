"""``explorer read`` on a job's folder (replicas of one pipeline): read, folded by stage, outliers
named, every rank's clock offset bounded, the slowest replica's critical path.

``--workers N`` sets how many processes read the rank files (default: every core for a large
job). ``--mesh pp=P,dp=D`` says how the ranks are numbered where the folder does not (dimensions
outermost first; checked against the folder). ``--html FILE`` also writes the folded view (one lane per stage, each outlier rank's own lane
a click away). Exit 0 when every rank was read and no rank is an outlier, 1 when a rank is named or could
not be read in full (the answer is then partial and says so), 2 on bad input.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from explorer.verdict import with_verdict

if TYPE_CHECKING:
    from explorer.pipeline.traces.mesh import Mesh


def read(
    path: Path,
    json_out: bool,
    html: Optional[str] = None,
    workers: Optional[int] = None,
    mesh: Optional[Mesh] = None,
) -> int:
    from explorer.pipeline.analysis.clocks import clocks
    from explorer.pipeline.analysis.fold import fold
    from explorer.pipeline.analysis.fold_path import folded_path
    from explorer.pipeline.printout.job import job_document, job_text
    from explorer.pipeline.traces.job import read_job
    from explorer.processes.pool import stderr_progress

    t0 = time.perf_counter()
    job = read_job(path, stderr_progress("rank files"), workers, mesh)
    folded, clocked = fold(job), clocks(job)
    costs = _step_costs(path, job, folded)
    critical = folded_path(job, clocked)
    took = time.perf_counter() - t0
    code = 1 if folded.outliers or job.unread else 0
    if json_out:
        doc = job_document(job, folded, took, clocked, costs, critical)
        print(json.dumps(with_verdict(doc, code)), flush=True)
    else:
        print(job_text(job, folded, took, clocked, costs, critical), flush=True)
    if html:
        from explorer.pipeline.cli.read_job_views import write_html

        write_html(job, folded, html, costs, critical)
    return code


def _step_costs(path: Path, job, folded):
    """Each outlier's cost to the step, on the schedule the job's ``spec.json`` holds (None where
    it holds none the explorer can build: the rest of the report stands without it)."""
    from explorer.errors import InputError
    from explorer.pipeline.analysis.step_cost import step_costs
    from explorer.pipeline.runtime.spec import RunSpec

    if not folded.outliers:
        return None
    try:
        schedule = RunSpec.read(Path(path)).build_schedule()
    except (InputError, ValueError, KeyError, TypeError, OSError):
        return None
    return step_costs(job, folded, schedule)


__all__ = ["read"]
