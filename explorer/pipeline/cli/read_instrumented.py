"""``explorer read`` on a folder ``explorer.instrument(engine, out_dir)`` wrote (a user's DeepSpeed job).

The report says who ran what: per rank its stage, state and the step it reached; the failure
(first in time, DeepSpeed's exception and traceback tail, later errors as consequences); and
the explorer's check of the schedule the ranks actually ran, with the failing rank's listing
marked where a finding is. ``--json`` gives the same as ``kind: "pipeline"``.
Exit 0 when the job finished without a failure or finding, 1 otherwise.
"""

from __future__ import annotations

import json
from pathlib import Path

#: The job's state (:func:`~explorer.pipeline.traces.follow.job_state`) in the report's head.
JOB_WORDS = {
    "running": "still running or cut off",
    "finished": "finished",
    "failed": "failed",
    "stopped": "ended with no failure written",
}


def read(path: Path, json_out: bool) -> int:
    import socket

    from explorer.pipeline.analysis.instrumented import instrumented_document
    from explorer.pipeline.traces.instrumented import read_instrumented
    from explorer.processes.ranks import process_alive

    run = read_instrumented(path)
    run.end_if_gone(process_alive, socket.gethostname())  # killed with torchrun: not running
    doc = instrumented_document(run)
    print(json.dumps(doc) if json_out else text(run, doc), flush=True)
    return 0 if doc["ok"] else 1


def text(run, doc: dict) -> str:
    """The plain-text report (see the module docstring)."""
    from explorer.pipeline.analysis import check
    from explorer.pipeline.printout.listing import rank_listing, summary
    from explorer.pipeline.traces.follow import STATE_WORDS

    lines = [
        f"DeepSpeed {doc['deepspeed_version']} job {doc['run']} traced by explorer.instrument "
        f"({len(doc['ranks'])} ranks, {len(doc['instructions'])} instructions; "
        f"{JOB_WORDS[doc['state']]})"
    ]
    for r in doc["ranks"]:
        lines.append(
            f"  rank {r['rank']} (stage {r['stage']}): {STATE_WORDS.get(r['state'], r['state'])}, "
            f"iteration {r['iteration']}, step {r['last_step']}"
        )
    f = doc["failure"]
    if f:
        lines.append(
            f"first failure: rank {f['rank']}, stage {f['stage']}, step {f['step']}, "
            f"{f['instruction']}: {f['message']}"
        )
        lines += [f"    {t}" for t in (f.get("traceback_tail") or "").splitlines()[-2:]]
        lines += [f"  then {c}" for c in f["consequences"]]
    schedule = run.schedule()
    if schedule is not None:
        report = check(schedule, other_model=False)
        rank = f["rank"] if f and f.get("rank") is not None else None
        if rank is None and report.findings.hazards:
            rank = report.findings.hazards[0].at.rank
        if rank is not None:
            lines.append("")
            lines += rank_listing(report, rank)
        lines.append(summary(report))
        if doc["contract"]:
            first = doc["findings"][-len(doc["contract"])]
            lines.append(f"{len(doc['contract'])} message(s) broke the P2P contract; the first:")
            lines.append(f"  {first['describe']}")
    else:
        lines.append("# the schedule is not known yet: not every stage has started an iteration")
    return "\n".join(lines)


__all__ = ["read", "text"]
