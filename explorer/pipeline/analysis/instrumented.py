"""The ``explorer read --json`` document of a DeepSpeed job's live trace: what ran, checked.

The reader (:mod:`explorer.pipeline.traces.instrumented`) only reads what the ranks wrote and
rebuilds the schedule they ran; checking that schedule is analysis, here.
"""

from __future__ import annotations

from explorer.pipeline.analysis.check import Report, check
from explorer.pipeline.analysis.contract import check_contract, describe
from explorer.pipeline.traces.instrumented import InstrumentedRun


def instrumented_document(run: InstrumentedRun) -> dict:
    """``explorer read --json``: kind pipeline, ranks, instructions, findings, failure.

    The P2P contract (every message against the receive it met) is checked on the messages the
    ranks described; its violations are findings like the schedule's, and listed in ``contract``.
    """
    schedule = run.schedule()
    report = check(schedule, other_model=False) if schedule is not None else None
    failure = run.failure()
    contract = check_contract(schedule, run.follower.records) if schedule is not None else []
    findings = _findings(report) + [_contract(v) for v in contract] if report else None
    return {
        "kind": "pipeline",
        "source": "explorer.instrument",
        "engine": "deepspeed",
        "deepspeed_version": run.version,
        "run": run.run_id,
        # the verdict the exit code gives: finished, no failure, nothing found
        "ok": failure is None and run.finished and not findings,
        "finished": run.finished,
        "state": run.state,
        "losses": [],
        "bitwise_equal_to_reference": None,
        "ranks": run.ranks(),
        "schedule": report.to_dict()["schedule"] if report else None,
        "findings": findings,
        "contract": [v.to_dict() for v in contract],
        "failure": failure,
        "instructions": run.follower.records,
    }


def _findings(report: Report) -> list[dict]:
    """Every finding of the check, each with where (rank, stage, step) and its words."""
    out = []
    f = report.findings
    for h in f.hazards:
        out.append({"type": "hazard", **h.to_dict(), "describe": h.describe()})
    for u in f.unmatched:
        out.append({"type": "unmatched", **u.to_dict(), "describe": u.describe()})
    for m in f.mismatched:
        out.append({"type": "mismatched", **m.to_dict(), "describe": m.describe()})
    if f.deadlock:
        out.append({"type": "deadlock", **f.deadlock.to_dict(), "describe": f.deadlock.describe()})
    return out


def _contract(violation) -> dict:
    """A contract violation as a finding (``type: contract``), where and its words."""
    return {"type": "contract", **violation.to_dict(), "describe": describe(violation)}


__all__ = ["instrumented_document"]
