"""A job's ``TORCH_TRACE`` (and profiler traces) as the probe's own records, one :class:`ProbeResult` per rank.

The probe records each iteration as it runs; a job's traces are read after the fact and put
into the same records, so the diagnosis, the views, the report and the JSON are the probe's:

* compiles come from the structured trace, with *every* failed guard of a recompile;
* iterations come from a profiler trace recorded with a ``schedule=`` (``ProfilerStep#N``):
  each step's time, the compiled regions that ran in it (the variants), and the compiles
  whose start falls inside it (both clocks are wall-clock microseconds);
* a frame past its ``recompile_limit`` that ran no compiled region in a step ran eagerly:
  the same rule as the probe's tracking backend.

Without a profiler trace nothing says which iteration compiled or which variant ran: those
fields stay empty, and a note says so and how to record one. Pure python: no torch.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional, Sequence

from explorer.compile.analysis.diagnosis import diagnose
from explorer.compile.analysis.ranks import merge_ranks
from explorer.compile.traces.compiles_only import diagnose_compiles_only
from explorer.compile.traces.detect import profile_files, trace_files
from explorer.compile.traces.profile import CompileProfile, ProfiledStep, read_compile_profile
from explorer.compile.traces.records import (
    EAGER,
    LIMIT_FAILURE,
    UNKNOWN,
    CompileEvent,
    GraphBreak,
    Iteration,
    ProbeResult,
    VariantGuards,
    frame_of,
    iteration_of_record,
    limit_failure,
)
from explorer.compile.traces.torch_trace import TorchTrace, read_torch_trace
from explorer.errors import InputError, excerpt
from explorer.failure import Failure, FailureKind

#: How to record what the structured trace lacks, said wherever it is missing.
HOW_TO_PROFILE = (
    "record a profiler trace beside it: torch.profiler.profile(schedule=torch.profiler.schedule("
    "wait=1, warmup=1, active=20), on_trace_ready=torch.profiler.tensorboard_trace_handler(DIR)) "
    "with prof.step() at the end of every iteration"
)
#: Slack when placing a compile's start inside a profiled step (two clocks read microseconds apart).
SLACK_US = 1000.0


def _step_of(start_us: Optional[float], steps: Sequence[ProfiledStep]) -> int:
    if start_us is None:
        return UNKNOWN
    for slack in (0.0, SLACK_US):  # a step that holds it outright before one that nearly does
        for s in steps:
            if s.start_us - slack <= start_us <= s.end_us + slack:
                return s.step
    return UNKNOWN


def _compiles(trace: TorchTrace, steps: Sequence[ProfiledStep], wall: bool) -> list[CompileEvent]:
    names = {frame_of(c.compile_id): c.function for c in trace.compiles if c.function}
    out = []
    for c in trace.compiles:
        if not (c.metrics or c.function):
            continue  # a cache answer or guard dump without its compile: nothing to report
        failed = limit_failure(c.failed, c.fail_reason)
        out.append(
            CompileEvent(
                compile_id=c.compile_id,
                iteration=_step_of(c.start_us, steps) if wall else UNKNOWN,
                function=c.function or names.get(frame_of(c.compile_id)),
                reason=c.reasons[0] if c.reasons else None,
                failed=failed,
                seconds=c.seconds,
                reasons=tuple(c.reasons),
                cache=tuple(c.cache),
            )
        )
    return out


def _iterations(
    trace: TorchTrace, steps: Sequence[ProfiledStep], compiles: Sequence[CompileEvent], wall: bool
) -> list[Iteration]:
    """One record per profiled step: its time, whether it compiled, the variants that ran, eager fallback."""
    starts = {c.compile_id: c.start_us for c in trace.compiles}
    limits = [c for c in compiles if c.failed == LIMIT_FAILURE]
    out = []
    for s in steps:
        ran: dict[str, str] = {}
        for region in s.regions:
            ran[frame_of(region)] = region
        compiled = (
            any(c.iteration == s.step and not c.failed for c in compiles)
            if wall
            else s.compiles > 0
        )
        limited = {
            c.frame
            for c in limits
            if 0 <= c.iteration <= s.step
            or (
                wall
                and (start := starts.get(c.compile_id)) is not None
                and start <= s.end_us + SLACK_US
            )
        }
        fell = limited - set(ran)
        labels = {**ran, **{f: EAGER for f in fell}}
        variants = tuple(labels[f] for f in sorted(labels, key=lambda f: (len(f), f)))
        fallback = bool(fell) if wall or not limits else None
        out.append(Iteration(s.step, s.dur_us / 1000.0, compiled, variants, fallback))
    return out


def _breaks(trace: TorchTrace, compiles: Sequence[CompileEvent]) -> list[GraphBreak]:
    """Graph breaks once per reason and place (Dynamo logs one at every compile of the frame)."""
    when = {c.compile_id: c.iteration for c in compiles}
    seen: dict[tuple[str, str], list] = {}
    for b in trace.breaks:
        seen.setdefault((b.reason, b.where), [b, []])[1].append(b.compile_id)
    for c in trace.compiles:
        for text in c.restart_reasons if not trace.breaks else ():
            seen.setdefault((text.splitlines()[0], ""), [None, []])[1].append(c.compile_id)
    out = []
    for (reason, where), (first, ids) in seen.items():
        detail = "\n".join(
            x for x in (f"at {where}" if where else "", first.detail if first else "") if x
        )
        out.append(
            GraphBreak(ids[0], when.get(ids[0], UNKNOWN), reason, detail, tuple(dict.fromkeys(ids)))
        )
    return out


def _guards(trace: TorchTrace) -> list[VariantGuards]:
    """For each frame with several variants: the guards each holds that not all of them share."""
    frames: dict[str, list] = {}
    for c in trace.compiles:
        if c.guards:
            frames.setdefault(frame_of(c.compile_id), []).append(c)
    out = []
    for variants in frames.values():
        if len(variants) < 2:
            continue
        shared = set.intersection(*(set(v.guards) for v in variants))
        out += [
            VariantGuards(
                v.compile_id, v.function or "?", tuple(g for g in v.guards if g not in shared)
            )
            for v in variants
        ]
    return out


def _probe_records(trace: TorchTrace) -> Optional[list[tuple[Iteration, tuple[str, ...]]]]:
    """The iterations ``compile-probe`` wrote into this trace, in order, or None when it wrote
    none, or when one is not a record it writes (then the trace is read as any job's)."""
    if not trace.probe_records:
        return None
    read = [iteration_of_record(doc) for doc in trace.probe_records]
    if any(r is None for r in read):
        return None
    got = [r for r in read if r is not None]
    numbers = [it.iteration for it, _ in got]
    return got if numbers == sorted(set(numbers)) else None


def _probe_result(
    trace: TorchTrace, probed: list[tuple[Iteration, tuple[str, ...]]], label: str
) -> ProbeResult:
    """The records of a trace ``compile-probe`` wrote: its compiles, each placed in the iteration
    the probe drained it in, and the probe's own iterations, so that the diagnosis is the one
    the probe gave (the same function over the same records)."""
    compiles = _placed(_compiles(trace, [], False), probed)
    last = trace.probe_records[-1]
    limit, threads = last.get("recompile_limit"), last.get("threads")
    result = ProbeResult(
        iterations=[it for it, _ in probed],
        compiles=compiles,
        graph_breaks=_breaks(trace, compiles),
        guards=_guards(trace),
        source="TORCH_TRACE",
        variant_source="compile-probe's own records in the trace",
        recompile_limit=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        label=label or Path(trace.path).name,
        threads=threads if isinstance(threads, int) and not isinstance(threads, bool) else None,
    )
    result.notes = [
        f"iterations as compile-probe recorded them in the trace ({len(probed)}): the probe's "
        "own times and variants, not a profiler's"
    ] + _cut_note(trace)
    result.diagnosis = diagnose(result)
    return result


def _placed(
    compiles: Sequence[CompileEvent], probed: list[tuple[Iteration, tuple[str, ...]]]
) -> list[CompileEvent]:
    """Each compile in the iteration the probe drained it in. An id may come back (Dynamo
    numbers anew after ``torch._dynamo.reset()``): the compiles of one id, in the trace's order,
    take that id's iterations in the records' order, so each compile keeps its own."""
    queues: dict[str, list[int]] = {}
    for it, ids in probed:
        for cid in ids:
            queues.setdefault(cid, []).append(it.iteration)
    return [
        replace(c, iteration=queues[c.compile_id].pop(0) if queues.get(c.compile_id) else UNKNOWN)
        for c in compiles
    ]


def _run_records(trace: TorchTrace, event: str) -> list[dict]:
    """compile-probe's ``start`` or ``end`` records of its run in ``trace`` (readable ones)."""
    return [d for d in trace.probe_runs if isinstance(d, dict) and d.get("event") == event]


def _probe_run_failure(
    trace: TorchTrace, probed: Optional[list[tuple[Iteration, tuple[str, ...]]]]
) -> Optional[Failure]:
    """How the run of ``compile-probe`` that wrote ``trace`` ended, by its start and end records
    (:data:`~explorer.compile.traces.records.PROBE_RUN_ARTIFACT`): None for a run that recorded
    every iteration it announced, or for a trace no probe opened (any job's)."""
    name = Path(trace.path).name
    runs = trace.probe_runs
    starts, ends = _run_records(trace, "start"), _run_records(trace, "end")
    if not runs and not (trace.probe_records and probed is None):
        return None
    if len(starts) > 1:
        raise InputError(
            f"{name} holds {len(starts)} runs of compile-probe (one process ran it "
            f"{len(starts)} times): give each run its own TORCH_TRACE folder and read one"
        )
    recorded = len(probed or [])
    if None in runs or not starts or len(ends) > 1 or probed is None and trace.probe_records:
        return Failure(
            FailureKind.UNFINISHED,
            f"compile-probe's records in {name} cannot all be read (cut or edited): what they "
            "said of the run is unknown, so no verdict of 'no recompile' is given",
        )
    asked = starts[0].get("iterations")
    if not ends:
        return Failure(
            FailureKind.UNFINISHED,
            f"compile-probe's run in {name} has no end: it recorded {recorded} of the {asked} "
            "iterations asked for, then its process ended (the step exited, crashed or was "
            "killed) or the trace was cut; no verdict of 'no recompile' is given",
        )
    end = ends[0]
    said = end.get("failure")
    if isinstance(said, dict) and isinstance(said.get("message"), str):
        kind = said.get("kind")
        known = kind in {k.value for k in FailureKind}
        return Failure(FailureKind(kind) if known else FailureKind.EXCEPTION, said["message"])
    if end.get("iterations") != recorded:
        return Failure(
            FailureKind.UNFINISHED,
            f"compile-probe's run in {name} ended after {end.get('iterations')} iteration(s), but "
            f"the trace holds {recorded} of its records (cut or edited); no verdict is given",
        )
    return None


def rank_result(
    trace: TorchTrace, profiles: Sequence[CompileProfile], label: str = ""
) -> ProbeResult:
    """One process's records: compiles from its trace, iterations from the probe's own records
    in it (a trace ``compile-probe`` wrote) or from its profiler steps (if any), and how the
    probe's run ended where it opened one."""
    probed = _probe_records(trace)
    ended = _probe_run_failure(trace, probed)
    result = _rank_result(trace, probed, profiles, label)
    if ended is not None and result.failure is None:
        result.failure = ended
    return result


def _rank_result(
    trace: TorchTrace,
    probed: Optional[list[tuple[Iteration, tuple[str, ...]]]],
    profiles: Sequence[CompileProfile],
    label: str,
) -> ProbeResult:
    if probed:
        return _probe_result(trace, probed, label)
    by_step: dict[int, ProfiledStep] = {}
    for p in profiles:
        for s in p.steps:
            by_step.setdefault(s.step, s)
    steps = [by_step[k] for k in sorted(by_step)]
    wall = bool(profiles) and all(p.wall_clock for p in profiles)
    compiles = _compiles(trace, steps, wall)
    result = ProbeResult(
        iterations=_iterations(trace, steps, compiles, wall),
        compiles=compiles,
        graph_breaks=_breaks(trace, compiles),
        guards=_guards(trace),
        source="TORCH_TRACE",
        variant_source="profiler trace's compiled regions"
        if steps
        else "nothing (no profiler steps)",
        label=label or Path(trace.path).name,
    )
    result.notes = _notes(trace, profiles, steps, compiles, wall)
    result.diagnosis = diagnose(result) if result.iterations else diagnose_compiles_only(result)
    return result


def _notes(
    trace: TorchTrace,
    profiles: Sequence[CompileProfile],
    steps: Sequence[ProfiledStep],
    compiles: Sequence[CompileEvent],
    wall: bool,
) -> list[str]:
    notes = []
    if not profiles and trace.probe_records:
        notes.append(
            "compile-probe's iteration records in this trace cannot be read (cut, edited, or "
            "from more than one run): which iteration compiled, iteration times and any period "
            "are not known."
        )
    elif not profiles:
        notes.append(
            "TORCH_TRACE has no iteration records and never logs that a cached variant ran: which iteration "
            "compiled, iteration times, the variant each ran and any period cannot be known from it alone; "
            + HOW_TO_PROFILE
            + "."
        )
    elif not steps:
        notes.append(
            "the profiler trace has no ProfilerStep#N events (it was recorded without schedule=), so "
            "iterations cannot be told apart; " + HOW_TO_PROFILE + "."
        )
    elif not wall:
        notes.append(
            "the profiler trace has no baseTimeNanoseconds, so compiles cannot be placed in iterations by "
            "time: iterations are marked compiled from the profiler's own compile events."
        )
    outside = [c for c in compiles if c.iteration == UNKNOWN]
    if steps and wall and outside:
        notes.append(
            f"{len(outside)} of {len(compiles)} compiles ({', '.join(c.compile_id for c in outside[:6])}"
            f"{', ...' if len(outside) > 6 else ''}) happened outside the profiled steps "
            f"{steps[0].step}-{steps[-1].step}: their iteration is unknown."
        )
    return notes + _cut_note(trace)


def _cut_note(trace: TorchTrace) -> list[str]:
    if not trace.truncated:
        return []
    return [
        f"{Path(trace.path).name} ends in a cut line (the job was stopped while writing?): "
        "the records before it are read."
    ]


def _key(trace: TorchTrace, traces: Sequence[TorchTrace], folder: Path) -> int:
    """The rank of a trace; one trace without a rank is rank 0. Two traces for one rank are two runs: refused."""
    if len(traces) == 1:
        return trace.rank if trace.rank is not None else 0
    if trace.rank is None:
        pids = ", ".join(str(t.pid) for t in traces if t.rank is None)
        raise InputError(
            f"{excerpt(str(folder))} holds {len(traces)} structured traces and "
            f"{Path(trace.path).name} (pid {trace.pid}) names no rank (pids without one: {pids}): "
            "several processes outside torch.distributed, or several runs; read one file, or move the "
            "others aside"
        )
    twins = [t for t in traces if t.rank == trace.rank]
    if len(twins) > 1:
        raise InputError(
            f"{excerpt(str(folder))} holds {len(twins)} structured traces for rank {trace.rank} "
            f"({', '.join(Path(t.path).name for t in twins[:3])}): two runs in one folder; move the "
            "older one aside (TORCH_TRACE appends a new file per run)"
        )
    return trace.rank


def _ranks_of_one_job(
    traces: Sequence[TorchTrace], folder: Path, ranks: set[int]
) -> Optional[Failure]:
    """The traces compile-probe opened are of one job, with every rank's: ranks of two jobs
    (each trace names its job's id at its start) are refused, and a job whose rank wrote no
    trace here gives no clean verdict. Two runs' rank files copied into one folder once merged
    into one clean job, and a job missing rank 0 read as whole."""
    starts = [d for t in traces for d in _run_records(t, "start")]
    jobs = {str(d.get("job")) for d in starts if d.get("job")}
    if len(jobs) > 1:
        shown = ", ".join(sorted(jobs)[:3])
        raise InputError(
            f"{excerpt(str(folder))} holds the traces of {len(jobs)} jobs (compile-probe's runs "
            f"{shown}): rank files copied in from another job; move them aside and read one job"
        )
    sizes = {d.get("world") for d in starts}
    size = next(iter(sizes)) if len(sizes) == 1 else None
    if not isinstance(size, int) or isinstance(size, bool) or size <= 1:
        return None
    absent = sorted(set(range(size)) - ranks)
    if not absent:
        return None
    several = len(absent) > 1
    return Failure(
        FailureKind.UNFINISHED,
        f"the job had {size} ranks and rank{'s' if several else ''} "
        f"{', '.join(map(str, absent[:8]))} left no trace here: what "
        f"{'they' if several else 'it'} compiled is unknown, so no verdict of 'no recompile' "
        "is given for the job",
    )


def _profiles_near(path: Path) -> Optional[Path]:
    """The folder holding profiler traces that a file given alone leaves unread: the file's own,
    or the one above it with its direct subfolders (a job's ``torch_trace/`` and ``profiler/``
    side by side). None for a folder, and never a walk of the file system's root."""
    if not path.is_file():
        return None
    for folder, depth in ((path.parent, 0), (path.parent.parent, 1)):
        if folder != folder.parent and profile_files(folder, depth):
            return folder
    return None


def read_job(path: Path) -> ProbeResult:
    """Every rank's records in ``path`` (a TORCH_TRACE folder or file), merged into one report."""
    traces = [read_torch_trace(f) for f in trace_files(path)]
    if not traces:
        raise InputError(
            f"{excerpt(str(path))} holds no dedicated_log_torch_trace_*.log: run the job with TORCH_TRACE=DIR"
        )
    profiles, stepless = [], []
    for f in profile_files(path):
        found = read_compile_profile(f)
        profiles += found
        stepless += [] if found else [f.name]
    per_rank: dict[int, ProbeResult] = {}
    used: set[int] = set()
    for t in traces:
        rank = _key(t, traces, path)
        mine = [p for p in profiles if p.pid is not None and p.pid == t.pid]
        used |= {id(p) for p in mine}
        per_rank[rank] = rank_result(t, mine, f"rank {rank}")
        per_rank[rank].ranks = [
            {"file": t.path, "pid": t.pid, "profiles": sorted({p.path for p in mine})}
        ]
    missing = _ranks_of_one_job(traces, path, set(per_rank))
    merged = merge_ranks(per_rank, label=str(path))
    if missing is not None and merged.failure is None:
        merged.failure = missing
    cut = [Path(t.path).name for t in traces if t.truncated]
    if cut and merged.failure is None:  # what the log no longer says may be the recompile
        merged.failure = Failure(
            FailureKind.UNFINISHED,
            f"{', '.join(cut[:3])} end{'s' if len(cut) == 1 else ''} in a cut line (the job was "
            "stopped while writing?): the records before it are read, and what came after is "
            "unknown, so no verdict of 'no recompile' is given",
        )
    if stepless:
        merged.notes.append(
            f"{len(stepless)} profiler trace(s) without ProfilerStep#N events were not used "
            f"({', '.join(stepless[:3])}{', ...' if len(stepless) > 3 else ''}): they were recorded "
            "without schedule=, so they cannot tell iterations apart."
        )
    near = _profiles_near(path)
    if near is not None:
        merged.notes.append(
            f"profiler traces lie near {path.name} and were not read (a file was given, not its "
            f"folder): read {excerpt(str(near))} for the iterations they record."
        )
    odd = sum(t.skipped - int(t.truncated) for t in traces)
    if odd > 0:  # torch writes records and their payload lines only
        merged.notes.append(
            f"{odd} line(s) are neither a record nor a payload (edited, or more than a trace in "
            "the file): only the records were read."
        )
    strays = sorted({f"{Path(p.path).name} (pid {p.pid})" for p in profiles if id(p) not in used})
    if strays:
        merged.notes.append(
            f"profiler traces from processes that left no structured trace here were not used: "
            f"{', '.join(strays[:4])}{', ...' if len(strays) > 4 else ''}."
        )
    return merged


__all__ = ["HOW_TO_PROFILE", "SLACK_US", "rank_result", "read_job"]
