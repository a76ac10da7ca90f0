"""``explorer read`` on a pipelining job's profiler traces: every action placed, waits, bubble, critical path.

The document (``--json``) has ``kind: "pipeline"`` and the keys of ``explorer run``'s
(``instructions``: one record per placed action, every iteration), plus what only a
measurement across ranks says, for the last iteration (the first pays for warm-up):
``ranks`` (how each rank's actions were placed), ``bubble`` per rank with both denominators,
``critical_path`` (steps and sentences), ``waits`` (each receive split into waiting and
transfer), ``planned`` (the compute order the actions show, or the one given with ``--from``),
``unplaced`` (what could not be placed, and why) and ``notes``. Exit 0 when every action was
placed, 1 when something could not be, 2 on bad input. ``--html FILE`` writes the views.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from explorer.analysis.measured import bubble, critical_path, summary, waits
from explorer.traces.profiler.job import ProfiledJob, read_job


def _orders(name: str, ranks: int, microbatches: int, chunks: int) -> dict:
    """PyTorch's own ``pipeline_order`` for a class (imports torch; only for unlabelled traces)."""
    from explorer.runtime.pipelining_orders import pipeline_order

    return pipeline_order(name, ranks, microbatches, chunks)


def load(path: Path) -> ProfiledJob:
    return read_job(Path(path), _orders)


def planned_order(rows: list[dict]) -> dict[int, list[str]]:
    """Each rank's compute actions in the order they ran: the plan the actions show."""
    out: dict[int, list[str]] = {}
    for r in sorted(rows, key=lambda r: r["start"]):
        if r["kind"] in ("F", "B", "I", "W"):
            out.setdefault(r["rank"], []).append(r["action"])
    return out


def document(job: ProfiledJob, path: Optional[Path] = None) -> dict:
    """The ``--json`` document (see the module docstring)."""
    rows = job.iteration()
    stages: dict[int, set] = {}
    for r in job.records:
        stages.setdefault(r["rank"], set()).add(r["stage"])
    return {
        "kind": "pipeline",
        "source": "profiler traces",
        "path": str(path or job.path),
        "ok": not job.unplaced,
        "iterations": job.iterations,
        "iteration": job.iterations - 1,
        "ranks": [
            {
                "rank": rank,
                "placed_by": job.methods.get(rank),
                "stages": sorted(stages.get(rank, ())),
                "actions": sum(1 for r in rows if r["rank"] == rank),
            }
            for rank in job.ranks
        ],
        "instructions": job.records,
        "bubble": bubble(rows),
        "critical_path": critical_path(rows),
        "waits": waits(rows),
        "planned": {"source": "the measured actions", "order": planned_order(rows)},
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
    lines += [f"note: {n}" for n in doc["notes"]]
    lines += [f"not placed: {u}" for u in doc["unplaced"]]
    return "\n".join(lines)


def read(path: Path, json_out: bool, html: Optional[str] = None) -> int:
    """Read the job's traces at ``path``; print the report or JSON; exit 1 when something was not placed."""
    job = load(path)
    doc = document(job, path)
    print(json.dumps(doc) if json_out else text(doc), flush=True)
    if html:
        from explorer.commands.read_profile_views import write_html

        write_html(job, html)
    return 0 if doc["ok"] else 1
