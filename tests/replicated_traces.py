"""A job of thousands of ranks made from one real run's profiler traces, with the truth beside it.

``explorer run --engine torch --out DIR`` runs a pipeline of P ranks with PyTorch's own runtime
under ``torch.profiler``: ``spec.json`` and one Chrome trace per rank (``torch_rank<r>.json``),
written by the real profiler. :func:`replicate_traces` writes D data-parallel replicas of it, the
same way :mod:`replicated_job` copies the explorer's own rank files:

- rank ``R = replica * P + r`` is a copy of trace ``r`` with ``distributedInfo`` saying rank R
  of a world of P x D (the process groups of the copy are left out: one job, no group to name);
- every event of a replica is moved by one warp of its time (the same for its every rank, so a
  receive still ends after its send began) and every rank's clock is off by a known offset
  (its ``ts`` moved by it);
- stragglers at known ranks: one rank's backward spans (``PP:<s>B<m>``) ``factor`` times longer
  from a profiled iteration on, one rank's activation receives arriving ``delay_s`` later (the
  asynchronous ``gloo:recv`` its ``PP:<s>RECV_F<m>`` posted ends later, and so does the span of
  the forward that waits for it). A straggler lengthens its own spans only, as in
  :mod:`replicated_job`.

Iterations are the profiled ones, counted from 0 (each action's k-th span is iteration k);
``truth.json`` beside the copies names the planted ranks and every offset.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Optional

from replicated_job import TRUTH, Straggler, Truth, _Warp, default_stragglers, recorded_skews

_PP = re.compile(r"PP:(\d+)([A-Z_]+?)(\d+)$")
_CODES = {"F": "F", "B": "B", "I": "I", "W": "W", "RECV_F": "RA", "RECV_B": "RG"}


def _recorded(run: Path) -> tuple[dict, dict[int, dict]]:
    spec = json.loads((run / "spec.json").read_text())
    ranks = sorted(set(spec["schedule"]["stage_to_rank"]))
    return spec, {r: json.loads((run / f"torch_rank{r}.json").read_text()) for r in ranks}


def _complete(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and "ts" in e]


def _code(name: str) -> Optional[str]:
    m = _PP.match(name)
    return _CODES.get(m.group(2)) if m else None


def _planted_spans(events: list[dict], planted: list[Straggler]) -> dict[int, Straggler]:
    """``id(event) -> straggler`` for the spans the stragglers lengthen (see the docstring)."""
    by_name: dict[str, list[dict]] = {}
    for e in sorted((e for e in events if e["name"].startswith("PP:")), key=lambda e: e["ts"]):
        by_name.setdefault(e["name"], []).append(e)
    out: dict[int, Straggler] = {}
    for name, spans in by_name.items():
        for s in planted:
            if _code(name) != s.kind:
                continue
            for span in spans[s.from_iteration :]:
                if s.kind != "RA":
                    out[id(span)] = s
                    continue
                out.update((id(e), s) for e in _late(events, by_name, name, spans.index(span)))
    return out


def _late(events: list[dict], by_name: dict, name: str, it: int) -> list[dict]:
    """What a late activation makes later: the asynchronous receive posted in the ``it``-th
    ``name`` span (its data arrives later) and the forward of that micro-batch, which waits for
    the data inside its own span (so its span ends later too, its work unchanged)."""
    span = by_name[name][it]
    inside = [
        e
        for e in events
        if e["name"].endswith(":recv") and span["ts"] <= e["ts"] <= span["ts"] + span["dur"]
    ]
    m = _PP.match(name)
    assert m is not None  # only PP: spans of a receive get here
    stage, mb = m.group(1), m.group(3)
    forwards = by_name.get(f"PP:{stage}F{mb}", [])
    first = [min(inside, key=lambda e: e["ts"])] if inside else []
    return first + forwards[it : it + 1]


def _copy(
    doc: dict,
    rank: int,
    world: int,
    t0: float,
    offset_us: float,
    warp: _Warp,
    planted: list,
    skew: float = 0.0,
) -> dict:
    events = _complete(doc)
    slow = _planted_spans(events, planted)
    moved = []
    for e in events:  # warped on the recording's common time (see replicated_job.recorded_skews)
        start_s = (e["ts"] - t0) * 1e-6 - skew
        end_s = (e["ts"] + e.get("dur", 0.0) - t0) * 1e-6 - skew
        ts, end = (warp(start_s) + skew) * 1e6, (warp(end_s) + skew) * 1e6
        dur = end - ts
        s = slow.get(id(e))
        if s is not None:
            dur = dur * s.factor + s.delay_s * 1e6
        moved.append({**e, "ts": round(t0 + ts + offset_us, 3), "dur": round(dur, 3)})
    info = {k: v for k, v in doc.get("distributedInfo", {}).items() if k != "pg_config"}
    info.update(rank=rank, world_size=world, pg_count=0)
    head = {k: v for k, v in doc.items() if k not in ("traceEvents", "distributedInfo")}
    return {**head, "distributedInfo": info, "traceEvents": moved}


def replicate_traces(
    run: Path,
    out: Path,
    replicas: int,
    jitter: float = 0.03,
    offset_s: float = 0.05,
    stragglers: Optional[list[Straggler]] = None,
    from_iteration: int = 1,
    seed: int = 0,
) -> Truth:
    """Write a job of ``replicas`` copies of the torch-engine run folder ``run`` into ``out``.

    ``stragglers=None`` plants :func:`replicated_job.default_stragglers`; ``[]`` none. Offsets
    are uniform in ``[-offset_s, offset_s]``. Returns the truth (also written to ``truth.json``).
    """
    run, out = Path(run), Path(out)
    spec, docs = _recorded(run)
    p = len(docs)
    planted = (
        default_stragglers(spec, replicas, from_iteration) if stragglers is None else stragglers
    )
    complete = [e for d in docs.values() for e in _complete(d)]
    t0 = min(e["ts"] for e in complete)
    total = (max(e["ts"] + e.get("dur", 0.0) for e in complete) - t0) * 1e-6
    pp = sorted(e.get("dur", 0.0) for e in complete if e["name"].startswith("PP:"))
    segment = (pp[len(pp) // 2] * 1e-6 if pp else 0.0) or total / 100
    rng = random.Random(seed)
    iterations = max(
        Counter(e["name"] for e in _complete(d) if e["name"].startswith("PP:")).most_common(1)[0][1]
        for d in docs.values()
    )
    stages = len(spec["schedule"]["stage_to_rank"])
    truth = Truth(str(run), stages, p, replicas, iterations, jitter, seed)
    truth.offsets_s = [rng.uniform(-offset_s, offset_s) for _ in range(p * replicas)]
    truth.stragglers = planted
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(run / "spec.json", out / "spec.json")
    skews = recorded_skews(run)
    for replica in range(replicas):
        warp = _Warp(total * 1.01 + 1e-3, segment, jitter, rng)
        for r, doc in docs.items():
            rank = replica * p + r
            mine = [s for s in planted if s.rank == rank]
            offset_us = truth.offsets_s[rank] * 1e6
            copy = _copy(doc, rank, p * replicas, t0, offset_us, warp, mine, skews[r])
            (out / f"torch_rank{rank}.json").write_text(json.dumps(copy))
    (out / TRUTH).write_text(json.dumps(truth.to_dict(), indent=1))
    return truth


__all__ = ["replicate_traces"]
