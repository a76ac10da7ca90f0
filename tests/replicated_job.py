"""A job of thousands of ranks made from one real run folder, with the truth written beside it.

The explorer's engine records a pipeline of P ranks (``explorer run --out DIR``). A real job
runs that pipeline on D data-parallel replicas: P x D ranks. :func:`replicate` writes such a
job from the recorded run, so a reader can be tested at scale on data whose every event was
measured by the real engine and whose anomalies are known:

- rank ``R = replica * P + r`` holds a copy of the recorded pipeline rank ``r`` (``r`` is the
  rank the schedule's ``stage_to_rank`` gives its stages); every line is the engine's own line
  with ``rank`` renamed, written as the engine writes it (``json.dumps`` of the same keys in the
  same order), so the real reader reads it;
- the recorded iterations are tiled until each rank holds about ``events`` instructions
  (iteration ``i`` of the copy is recorded iteration ``i % n``, placed after ``i - 1``);
- every duration is jittered by warping each replica's time: the time line is cut into
  segments about one instruction long, each stretched by ``exp(N(0, jitter))``, the same warp for
  every rank of the replica. A warp keeps every order, so the copies stay causally consistent (a
  receive still ends after its send began, as on the real run) and clock offsets can be recovered
  from them; jittering each rank on its own would move a rank's sends past its peers' receives;
- every rank's clock is off by a known offset (its times and its start line's ``unix``);
- stragglers are planted at known ranks: one rank's backward passes ``factor`` times slower from
  an iteration on, one rank's activation receives ending ``delay_s`` later (a slow link). A
  straggler lengthens its own instructions only (moving the rank's later events alone would
  break causality with its peers); the fold reads durations, so it is named the same.

``truth.json`` beside the copies names the planted ranks and every offset; ``spec.json`` is the
recorded run's, unchanged, so the job is one run of one schedule on D replicas.
"""

from __future__ import annotations

import json
import math
import random
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

TRUTH = "truth.json"


@dataclass(frozen=True)
class Straggler:
    """A planted anomaly: ``kind`` (an instruction code) on ``rank`` from ``from_iteration`` on.

    ``factor`` multiplies the duration (a slow rank); ``delay_s`` adds to it (a slow link: the
    receive ends later)."""

    rank: int
    stage: int
    replica: int
    kind: str
    from_iteration: int
    factor: float = 1.0
    delay_s: float = 0.0
    peer: Optional[int] = None


@dataclass
class Truth:
    """What was planted: the layout, every rank's clock offset and the stragglers."""

    source: str
    stages: int
    pipeline_ranks: int
    replicas: int
    iterations: int
    jitter: float
    seed: int
    layout: str = "rank = replica * pipeline_ranks + pipeline rank"
    offsets_s: list[float] = field(default_factory=list)
    stragglers: list[Straggler] = field(default_factory=list)
    #: "replica-major" (the line above) or "pipe-major" (rank = pipeline rank * replicas + replica).
    order: str = "replica-major"

    def rank_at(self, replica: int, local: int) -> int:
        if self.order == "pipe-major":
            return local * self.replicas + replica
        return replica * self.pipeline_ranks + local

    def to_dict(self) -> dict:
        return {**asdict(self), "stragglers": [asdict(s) for s in self.stragglers]}


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _recorded(run: Path) -> tuple[dict, dict[int, list[dict]]]:
    """The recorded pipeline: its spec and each pipeline rank's lines. A run folder's ranks are
    its spec's; a data-parallel job ``explorer.instrument`` traced gives its replica 0."""
    if not (run / "spec.json").exists():
        from explorer.pipeline.traces.job_folder import instrument_layout

        lay = instrument_layout(run)
        assert lay is not None, f"{run} is neither a run folder nor a traced data-parallel job"
        spec = {"schedule": {"stage_to_rank": list(lay.stage_to_rank)}, "traced": True}
        ranks = range(lay.pipeline_ranks)
        return spec, {r: _lines(lay.files[int(lay.rank_at(0, r))]) for r in ranks}
    spec = json.loads((run / "spec.json").read_text())
    ranks = sorted(set(spec["schedule"]["stage_to_rank"]))
    lines = {r: _lines(run / f"rank{r}.jsonl") for r in ranks}
    unfinished = [r for r, ls in lines.items() if not any(x["type"] == "done" for x in ls)]
    if unfinished:  # its failure and hazard lines have no times to tile
        raise ValueError(
            f"{run} is a run that did not finish (rank {unfinished[0]} wrote no end): replicate "
            "a run that ran to its end"
        )
    return spec, lines


def default_stragglers(
    spec: dict,
    replicas: int,
    from_iteration: int,
    factor: float = 1.8,
    delay_s: float = 0.02,
    order: str = "replica-major",
    lines: Optional[dict[int, list[dict]]] = None,
) -> list[Straggler]:
    """One slow backward rank and one slow link, at ranks in the middle of the job.

    The link adds ``delay_s`` or the median receive of its stage in the recording's ``lines``,
    whichever is longer: a receive that waits long on a busy machine's recording would
    otherwise hide a fixed 20 ms under the fold's 1.25x threshold."""
    to_rank = spec["schedule"]["stage_to_rank"]
    p = len(set(to_rank))
    stages = len(to_rank)
    at = Truth("", stages, p, replicas, 0, 0.0, 0, order=order).rank_at
    slow_stage, link_stage = min(2, stages - 1), max(1, stages - 1)
    slow_rep, link_rep = replicas // 2, replicas // 3
    link_rank = at(link_rep, to_rank[link_stage])
    recorded_ra_s = _median_of(lines or {}, to_rank[link_stage], "RA")
    return [
        Straggler(
            at(slow_rep, to_rank[slow_stage]),
            slow_stage,
            slow_rep,
            "B",
            from_iteration,
            factor=factor,
        ),
        Straggler(
            link_rank,
            link_stage,
            link_rep,
            "RA",
            from_iteration,
            delay_s=max(delay_s, recorded_ra_s),
            peer=at(link_rep, to_rank[link_stage - 1]),
        ),
    ]


#: What an instrument's start line says of the job: rewritten in each copy.
_JOB_KEYS = ("world_size", "data_parallel_size", "replica")


def _template(line: dict) -> tuple[str, list[str]]:
    """The line as a %-format of its rank, iteration, start, end and unix (json.dumps' text)."""
    slots = [k for k in ("rank", "iteration", "start", "end", "unix", *_JOB_KEYS) if k in line]
    marked = {k: (f"@@{k}@@" if k in slots else v) for k, v in line.items()}
    text = json.dumps(marked).replace("%", "%%")
    slots.sort(key=lambda k: text.index(f'"@@{k}@@"'))
    for k in slots:
        text = text.replace(f'"@@{k}@@"', "%s")
    return text, slots


def _code(line: dict) -> str:
    text = line.get("text", "")
    i = 0
    while i < len(text) and text[i].isdigit():
        i += 1
    j = i
    while j < len(text) and text[j].isalpha():
        j += 1
    return text[i:j]


def recorded_skews(run: Path) -> list[float]:
    """Each recorded pipeline rank's own clock skew against its pipeline's first rank (the middle
    of the bounds the explorer's clocks give the recording; 0 where unbounded).

    A copy's warp is applied on the recording's common time (each rank's times less its skew)
    and the skew added back: warping each rank's own times would stretch its skew with the warp's
    slope, so a copy's offset would no longer be the planted one plus the recording's."""
    from explorer.pipeline.analysis.clocks import clocks
    from explorer.pipeline.traces.job import read_job

    job = read_job(run)
    estimate = clocks(job).estimate
    lay = job.layout
    return [
        float(x) if x == x else 0.0
        for x in (estimate[int(lay.rank_at(0, r))] for r in range(lay.pipeline_ranks))
    ]


def _median_duration(lines: dict[int, list[dict]]) -> float:
    durations = sorted(
        x["end"] - x["start"] for ls in lines.values() for x in ls if x["type"] == "instr"
    )
    return durations[len(durations) // 2] if durations else 0.0


def _median_of(lines: dict[int, list[dict]], rank: int, code: str) -> float:
    """The recorded median duration of one rank's instructions of one kind (0: none)."""
    durations = sorted(
        x["end"] - x["start"]
        for x in lines.get(rank, [])
        if x["type"] == "instr" and _code(x) == code
    )
    return durations[len(durations) // 2] if durations else 0.0


def _span(lines: dict[int, list[dict]]) -> float:
    ends = [x["end"] for ls in lines.values() for x in ls if "end" in x]
    return max(ends) if ends else 0.0


class _Warp:
    """A replica's time, stretched and shrunk by turns (see the module docstring): increasing,
    so every order of events is kept; the identity when ``jitter`` is 0."""

    def __init__(self, total: float, segment: float, jitter: float, rng: random.Random) -> None:
        n = max(1, math.ceil(total / segment) + 1)
        self.segment = segment
        self.slopes = [math.exp(rng.gauss(0.0, jitter)) if jitter else 1.0 for _ in range(n)]
        self.knots = [0.0]
        for slope in self.slopes[:-1]:
            self.knots.append(self.knots[-1] + slope * segment)

    def __call__(self, t: float) -> float:
        i = min(max(int(t // self.segment), 0), len(self.slopes) - 1)
        return self.knots[i] + (t - i * self.segment) * self.slopes[i]


def _write_rank(
    path: Path,
    lines: list[dict],
    rank: int,
    iterations: int,
    n_rec: int,
    period: float,
    offset: float,
    warp: _Warp,
    planted: list[Straggler],
    job: dict,
    skew: float = 0.0,
) -> None:
    """One rank's file: the recorded lines tiled over ``iterations``, jittered, planted, offset
    (``job``: what its start line says of the job, where it says it)."""
    head = [x for x in lines if x["type"] == "start"]
    tail = [x for x in lines if x["type"] == "done"]
    body = [x for x in lines if x["type"] not in ("start", "done")]
    templates = [_template(x) for x in lines]
    by_id = {id(x): t for x, t in zip(lines, templates)}
    out: list[str] = []

    def emit(line: dict, values: dict) -> None:
        text, slots = by_id[id(line)]
        out.append(text % tuple(repr(values[k]) for k in slots))

    for x in head:
        emit(x, {**x, "rank": rank, "unix": x["unix"] + offset, **job})
    for block in range(math.ceil(iterations / n_rec)):
        base = block * period
        for x in body:
            it = block * n_rec + x["iteration"]
            if it >= iterations:
                continue
            if "start" not in x:  # a traced rank's schedule: what it ran, no time
                emit(x, {**x, "rank": rank, "iteration": it})
                continue
            start = warp(x["start"] + base - skew) + skew
            if x["type"] != "instr":
                end = warp(x["end"] + base - skew) + skew
                emit(
                    x,
                    {
                        **x,
                        "rank": rank,
                        "iteration": it,
                        "start": start + offset,
                        "end": end + offset,
                    },
                )
                continue
            dur = warp(x["end"] + base - skew) + skew - start
            code = _code(x)
            for s in planted:
                if s.kind == code and it >= s.from_iteration:
                    dur = dur * s.factor + s.delay_s
            emit(
                x,
                {
                    **x,
                    "rank": rank,
                    "iteration": it,
                    "start": start + offset,
                    "end": start + dur + offset,
                },
            )
    for x in tail:
        emit(x, {**x, "rank": rank})
    path.write_text("\n".join(out) + "\n")


def replicate(
    run: Path,
    out: Path,
    replicas: int,
    events: Optional[int] = None,
    iterations: Optional[int] = None,
    jitter: float = 0.03,
    offset_s: float = 0.05,
    stragglers: Optional[list[Straggler]] = None,
    from_iteration: int = 1,
    seed: int = 0,
    order: Optional[str] = None,
) -> Truth:
    """Write a job of ``replicas`` copies of the run folder ``run`` into ``out``; return the truth.

    ``order``: how the copies are numbered (default: pipe-major for an instrumented DeepSpeed
    run, as DeepSpeed numbers them; replica-major for the explorer's engine, as its copies are).

    ``events`` (instructions per rank on average, about) or ``iterations`` sets the length; by default the
    recorded iterations once. ``stragglers=None`` plants :func:`default_stragglers`; ``[]``
    plants none (an unperturbed job, jitter and offsets kept). Offsets are uniform in
    ``[-offset_s, offset_s]``.
    """
    run, out = Path(run), Path(out)
    spec, lines = _recorded(run)
    n_rec = 1 + max(x["iteration"] for ls in lines.values() for x in ls if "iteration" in x)
    per_iter = sum(x["type"] == "instr" for ls in lines.values() for x in ls) / len(lines) / n_rec
    if iterations is None:
        iterations = max(1, round(events / per_iter)) if events else n_rec
    if order is None:
        order = "pipe-major" if spec.get("traced") else "replica-major"  # DeepSpeed's numbering
    planted = (
        default_stragglers(spec, replicas, from_iteration, order=order, lines=lines)
        if stragglers is None
        else stragglers
    )
    p = len(lines)
    rng = random.Random(seed)
    truth = Truth(
        str(run), len(spec["schedule"]["stage_to_rank"]), p, replicas, iterations, jitter, seed
    )
    truth.order = order
    if order == "pipe-major":
        truth.layout = "rank = pipeline rank * replicas + replica"
    truth.offsets_s = [rng.uniform(-offset_s, offset_s) for _ in range(p * replicas)]
    truth.stragglers = planted
    out.mkdir(parents=True, exist_ok=True)
    if not spec.get("traced"):
        shutil.copyfile(run / "spec.json", out / "spec.json")
    period = _span(lines) * 1.05 + 0.001
    total = math.ceil(iterations / n_rec) * period
    segment = _median_duration(lines) or period / 100
    skews = recorded_skews(run)
    for replica in range(replicas):
        warp = _Warp(total, segment, jitter, rng)
        for r, ls in lines.items():
            rank = truth.rank_at(replica, r)
            mine = [s for s in planted if s.rank == rank]
            job = {"world_size": p * replicas, "data_parallel_size": replicas, "replica": replica}
            _write_rank(
                out / f"rank{rank}.jsonl",
                ls,
                rank,
                iterations,
                n_rec,
                period,
                truth.offsets_s[rank],
                warp,
                mine,
                job,
                skews[r],
            )
    (out / TRUTH).write_text(json.dumps(truth.to_dict(), indent=1))
    return truth


__all__ = ["Straggler", "TRUTH", "Truth", "default_stragglers", "replicate"]
