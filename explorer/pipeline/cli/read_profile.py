"""``explorer read`` on a pipelining job's profiler traces: every action placed, waits, bubble, critical path.

The document (``--json``) has ``kind: "pipeline"`` and the keys of ``explorer run``'s
(``instructions``: one record per placed action, every iteration), plus what only a
measurement across ranks says, for the last iteration (the first pays for warm-up):
``ranks`` (how each rank's actions were placed), ``bubble`` per rank with both denominators,
``critical_path`` (steps and sentences), ``waits`` (each receive split into waiting and
transfer), ``planned`` (the compute order the actions show, or the one given with ``--from FILE.csv``
and where the measured order leaves it),
``unplaced`` (what could not be placed, and why) and ``notes``; for a PyTorch engine run
folder, ``contract`` (every P2P message that does not match its receive, as ``explorer read``
on the explorer's run folders reports them; null for traces without the runtime's order)
and ``failure`` (the first of them), and ``reference`` (its losses and gradients against the
single-process reference, as ``explorer run --engine torch`` judged them; null for traces
alone). Exit 0 when every action was placed (and the order matches ``--from``), no message
broke the contract and the run matched the reference within tolerance, 1 otherwise, 2 on bad
input; ``ok`` says the same. ``--html FILE`` writes
the views. Times in ``instructions`` are seconds from the job's first placed action; those in
``critical_path``, ``waits`` and ``bubble`` from the analysed iteration's first action.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from explorer.pipeline.analysis.measured import (
    bubble,
    critical_path,
    order_differences,
    planned_order,
    summary,
    waits,
)
from explorer.pipeline.traces.profiler.job import ProfiledJob, read_job
from explorer.pipeline.traces.torch_result import read_reference, wrong_result


def _orders(name: str, ranks: int, microbatches: int, chunks: int) -> dict:
    """PyTorch's own ``pipeline_order`` for a class (imports torch; only for unlabelled traces)."""
    from explorer.pipeline.runtime.pipelining_orders import pipeline_order

    return pipeline_order(name, ranks, microbatches, chunks)


def load(path: Path) -> ProfiledJob:
    return read_job(Path(path), _orders)


def plan_order(plan: str) -> dict[int, list[str]]:
    """Each rank's compute actions of a schedule CSV, in order: PyTorch's, or the explorer's own
    (``schedule --format csv``), read by the reader ``check --from`` uses, so a file one
    command takes the other takes too."""
    from explorer.errors import InputError
    from explorer.pipeline.schedules.torch_csv import order_from_schedule, read_schedule_csv

    try:
        order = order_from_schedule(read_schedule_csv(plan))
    except InputError as exc:
        raise InputError(f"--from {exc}") from None
    return {
        r: [str(p) for a in acts if a is not None for p in a.parts if p.type.is_compute]
        for r, acts in order.items()
    }


def contract(path: Path) -> dict:
    """The P2P contract of a PyTorch engine run folder (``explorer run --engine torch --out``):
    ``contract`` (every violation) and ``failure`` (the first one); empty for other traces."""
    from explorer.pipeline.analysis.contract import failure_of
    from explorer.pipeline.runtime.run_folder import torch_contract

    found = torch_contract(Path(path)) if Path(path).is_dir() else None
    if found is None:
        return {"contract": None, "failure": None}
    schedule, violations = found
    first = failure_of(violations[0], schedule).to_dict() if violations else None
    return {"contract": [v.to_dict() for v in violations], "failure": first}


def document(job: ProfiledJob, path: Optional[Path] = None, plan: Optional[str] = None) -> dict:
    """The ``--json`` document (see the module docstring)."""
    trace = job.iteration()
    measured = planned_order(trace)
    if plan:
        order = plan_order(plan)
        planned = {
            "source": plan,
            "order": order,
            "differences": order_differences(measured, order),
        }
    else:
        planned = {"source": "the measured actions", "order": measured, "differences": []}
    stages: dict[int, set] = {}
    for r in job.records:
        stages.setdefault(r["rank"], set()).add(r["stage"])
    checked = contract(Path(path or job.path))
    against = read_reference(Path(path or job.path))
    right = against is None or against["within_tolerance"] is True
    return {
        "kind": "pipeline",
        "source": "profiler traces",
        "path": str(path or job.path),
        "ok": not job.unplaced and not checked["contract"] and right and not planned["differences"],
        **checked,
        "reference": against,
        "iterations": job.iterations,
        "iteration": job.iterations - 1,
        "ranks": [
            {
                "rank": rank,
                "placed_by": job.methods.get(rank),
                "stages": sorted(stages.get(rank, ())),
                "actions": int((trace.rank == rank).sum()),
            }
            for rank in job.ranks
        ],
        "instructions": job.records,
        "bubble": bubble(trace),
        "critical_path": critical_path(trace),
        "waits": waits(trace),
        "planned": planned,
        "unplaced": job.unplaced,
        "notes": job.notes,
    }


def text(doc: dict) -> str:
    """The report a person reads: placement per rank, bubble, the critical path in words, the longest waits."""
    lines = [
        f"profiler traces of {len(doc['ranks'])} rank(s), {doc['iterations']} iteration(s); "
        f"figures for iteration {doc['iteration']} (the last)"
    ]
    for r in doc["ranks"]:
        lines.append(
            f"  rank {r['rank']}: stages {r['stages']}, {r['actions']} actions, placed from {r['placed_by']}"
        )
    lines.append("bubble (idle share of the iteration | idle over the rank's own compute):")
    for b in doc["bubble"]:
        ideal = "n/a" if b["share_of_compute"] is None else f"{b['share_of_compute']:.2f}x"
        lines.append(
            f"  rank {b['rank']}: {b['share_of_iteration']:.1%} of {b['iteration_s'] * 1e3:.3g} ms | "
            f"{ideal} of {b['compute_s'] * 1e3:.3g} ms compute"
        )
    cp = doc["critical_path"]
    lines.append(summary(cp))
    lines += [f"  {s}" for s in cp["sentences"]]
    worst = sorted(doc["waits"], key=lambda w: -w["blocked"])[:5]
    if worst:
        lines.append("longest receives (blocked = waiting for the partner + transfer):")
        for w in worst:
            lines.append(
                f"  rank {w['rank']} {w['action']} <- rank {w['from_rank']} {w['from_action']}: "
                f"{w['blocked'] * 1e3:.3g} ms = {w['waiting'] * 1e3:.3g} waiting + "
                f"{w['transfer'] * 1e3:.3g} transfer"
            )
    lines += [f"differs from the plan: {d}" for d in doc["planned"]["differences"]]
    lines += [f"note: {n}" for n in doc["notes"]]
    lines += [f"not placed: {u}" for u in doc["unplaced"]]
    if doc["failure"]:
        lines.append(f"{len(doc['contract'])} message(s) broke the P2P contract; the first:")
        lines.append(f"  {doc['failure']['message']}")
    elif doc["contract"] is not None:
        lines.append("P2P contract: every message matched its receive")
    if doc["reference"] is not None:
        wrong = wrong_result(doc["reference"])
        lines.append(
            f"WRONG: {wrong}" if wrong else "losses and gradients within tolerance of the reference"
        )
    return "\n".join(lines)


def read(path: Path, json_out: bool, html: Optional[str] = None, plan: Optional[str] = None) -> int:
    """Read the job's traces at ``path``; print the report or JSON; exit 1 when something was not
    placed or the measured order differs from the ``--from`` plan."""
    job = load(path)
    doc = document(job, path, plan)
    print(json.dumps(doc) if json_out else text(doc), flush=True)
    if html:
        from explorer.pipeline.cli.read_profile_views import write_html
        from explorer.pipeline.schedules.torch_csv import read_schedule_csv

        write_html(job, html, read_schedule_csv(plan) if plan else None)
    return 0 if doc["ok"] else 1


__all__ = ["load", "plan_order", "document", "text", "read"]
