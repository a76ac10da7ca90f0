"""``explorer read`` on a ``TORCH_TRACE`` folder: the ``compile-probe`` report for a job that already ran.

The text is ``compile-probe``'s report (iterations, compiles, graph breaks, the diagnosis,
each rank's verdict, where ranks differ, what the records cannot tell) followed by what
only a job's traces add: every failed guard of each recompile, the compile
caches' answers and the compile time.
``--json`` prints ``compile-probe --json``'s document with ``ranks``, ``divergence`` and
``notes``.

A folder of more than ``FOLD_AT`` (8) ranks' logs is read on every core (``--workers N`` to
choose), with a progress bar on a terminal, and folded: ranks that compiled alike are one
group named by its rank ranges, the largest told once and every other by what sets it apart;
``--json`` then holds ``groups`` (each with its ranks as ``[first, last]`` ranges) and
``unread``. Exit codes are ``compile-probe``'s: 0 nothing periodic or recompiling, 1 findings
(for a folded job also ranks that differ, or a rank not read in full: the answer is then
partial and says so), 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from explorer.compile.printout import job_document, job_report, trace_report
from explorer.verdict import with_verdict


def read(path: Path, json_out: bool, workers: Optional[int] = None) -> int:
    """Read the job's traces at ``path``, print the report (or JSON), return compile-probe's exit code."""
    from explorer.compile.analysis.job import FOLD_AT
    from explorer.compile.traces.detect import trace_files

    if len(trace_files(path)) > FOLD_AT:
        return _read_folded(path, json_out, workers)
    from explorer.compile.analysis.from_trace import read_job

    result = read_job(path)
    if json_out:
        print(
            json.dumps({**result.to_json(), "source": "TORCH_TRACE", "path": str(path)}, indent=1),
            flush=True,
        )
    else:
        print(trace_report(result), flush=True)
    return result.exit_code  # a cut log is a failure: as a job folder's cut log, no clean verdict


def _read_folded(path: Path, json_out: bool, workers: Optional[int]) -> int:
    from explorer.compile.analysis.job import read_folded
    from explorer.processes.pool import stderr_progress

    job = read_folded(path, stderr_progress("TORCH_TRACE logs"), workers)
    steady = all(g.story.cause in (None, "steady") for g in job.groups)
    code = 0 if steady and len(job.groups) == 1 and not job.unread else 1
    if json_out:
        print(json.dumps(with_verdict(job_document(job), code), indent=1), flush=True)
    else:
        print(job_report(job), flush=True)
    return code


__all__ = ["read"]
