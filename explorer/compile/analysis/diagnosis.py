"""Name the period and its cause from a probe's records, in one sentence.

Four causes look alike in a throughput log (the seed: 196, 196, 192, ...) and need opposite
fixes, so the order of the tests matters:

1. **eager fallback** — a frame hit ``recompile_limit`` and, from then on, every input that no
   cached variant matches runs uncompiled. Fix: raise the limit or stop the value changing.
2. **true recompiles** — compile events keep arriving every k iterations (a new shape, a new
   constant). Fix: mark the dimension dynamic or keep the value constant.
3. **cycling** — no compile after warm-up, but k cached variants run in turn and differ in
   speed. Nothing recompiles; the variants simply are not equally fast.
4. **unrelated** — the same variant runs every time, yet every k-th iteration is slower: work
   on a schedule (an optimizer step at a gradient-accumulation boundary, logging, checkpoints).

Pure python over :mod:`records`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from statistics import median
from typing import Optional, Sequence

from explorer.compile.analysis.period import (
    CONFIRMED_CYCLES,
    describe_period,
    find_time_period,
    label_period,
    phase_medians,
)
from explorer.compile.traces.records import CompileEvent, Diagnosis, Iteration, ProbeResult

#: Exact repeats of the variant sequence needed to call a cycle confirmed (labels carry no noise).
LABEL_CONFIRMED_CYCLES = 3
#: Share of the steady iterations' wall time spent waiting for cores that other processes
#: held, from which on a diagnosis says so.
BUSY_SHARE = 0.1


def steady_iterations(iterations: Sequence[Iteration]) -> list[Iteration]:
    """Iterations after warm-up: no compile, and not the first run of its variant label.

    The first call of a freshly compiled variant is often slow (a lazily compiled backward,
    autotuning, allocator growth); leaving it out keeps that one-off cost from posing as a period.
    """
    seen: set[Optional[str]] = set()
    steady: list[Iteration] = []
    for it in iterations:
        if it.compiled:
            continue
        if it.variant in seen:
            steady.append(it)
        seen.add(it.variant)
    return steady


def _ms(value: float) -> str:
    return f"{value:.3g} ms"


def _nth(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _contiguous_tail(its: Sequence[Iteration]) -> list[Iteration]:
    """The longest run of consecutive iteration numbers (a profiler may record windows with gaps).

    Label periods compare neighbours, so they need consecutive iterations; a probe's are always.
    """
    best: list[Iteration] = []
    run: list[Iteration] = []
    for it in its:
        run = run + [it] if run and it.iteration == run[-1].iteration + 1 else [it]
        if len(run) > len(best):
            best = run
    return best


def _confidence(k: int, cycles: int, confirmed: bool) -> str:
    """``; period 3, confirmed over 6 cycles`` or ``; period 3, seen over 2 cycles; run more iterations to confirm``."""
    return "; " + describe_period(k, cycles, confirmed)


def _label_cycles(labels: Sequence[object], k: int) -> tuple[int, bool]:
    cycles = len(labels) // k
    return cycles, cycles >= LABEL_CONFIRMED_CYCLES


def _regular_spacing(points: Sequence[int]) -> Optional[int]:
    """The gap k >= 2 shared by all (or all but the first) successive points, if any."""
    if len(points) < 3:
        return None
    gaps = [b - a for a, b in zip(points, points[1:])]
    k, count = Counter(gaps).most_common(1)[0]
    if k >= 2 and count >= len(gaps) - 1 and gaps[-1] == k:
        return k
    return None


def _all_guards(c: CompileEvent) -> list[str]:
    """Every failed guard of a compile (a trace keeps one per cached variant tried; the probe the first)."""
    reasons = c.reasons or ((c.reason,) if c.reason else ())
    return [
        g for g in (CompileEvent(c.compile_id, c.iteration, reason=r).guard for r in reasons) if g
    ]


def _functions(events: Sequence[CompileEvent]) -> str:
    names = sorted({f"'{e.function}'" for e in events if e.function})
    return ", ".join(names) or "a frame"


def _fallback(result: ProbeResult, limits: list[CompileEvent]) -> Optional[Diagnosis]:
    its = result.iterations
    fell = [it.iteration for it in its if it.fallback]
    known = [c.iteration for c in limits if c.iteration >= 0]
    if not limits or not known:
        return None
    first = min(known)
    if not fell:
        after = [it for it in its if it.iteration >= first]
        if after and all(it.fallback is None for it in after):
            return _fallback_unseen(result, limits, first)
        return None
    tail = [
        it.variant or "?" for it in _contiguous_tail([it for it in its if it.iteration >= first])
    ]
    k = label_period(tail)
    cycles: Optional[int] = None
    confirmed: Optional[bool] = None
    every = ""
    if k:
        cycles, confirmed = _label_cycles(tail, k)
        every = f", repeating every {k} iterations{_confidence(k, cycles, confirmed)}"
    limit = f" ({result.recompile_limit})" if result.recompile_limit is not None else ""
    guards = list(dict.fromkeys(g for c in limits for g in _all_guards(c)))
    last = (
        f" The guards that failed there: {', '.join(f'`{g}`' for g in guards[:4])}."
        if guards
        else ""
    )
    sentence = (
        f"Eager fallback after the recompile limit: "
        f"{_functions([c for c in result.compiles if c.frame in {x.frame for x in limits}])} hit "
        f"config.recompile_limit{limit} at iteration {first}; since then {len(fell)} of "
        f"{len(tail)} iterations ran uncompiled because no cached variant matched{every}.{last} "
        "Raise torch._dynamo.config.recompile_limit or stop the guarded value from changing."
    )
    return Diagnosis("eager-fallback", k, sentence, cycles, confirmed)


def _fallback_unseen(result: ProbeResult, limits: list[CompileEvent], first: int) -> Diagnosis:
    """The limit was hit, and which later iterations ran uncompiled was not recorded (a user's
    ``--step`` on a stock backend: the variant a frame shows is the last one that ran, stale
    once it fell back). Its labels then cycled, and were once called "cycling, not a
    recompile": the opposite of what the user must do. No period is given from them."""
    limit = f" ({result.recompile_limit})" if result.recompile_limit is not None else ""
    guards = list(dict.fromkeys(g for c in limits for g in _all_guards(c)))
    failed = f" The guard that failed there: `{guards[0]}`." if guards else ""
    sentence = (
        f"Eager fallback after the recompile limit: "
        f"{_functions([c for c in result.compiles if c.frame in {x.frame for x in limits}])} hit "
        f"config.recompile_limit{limit} at iteration {first}; from then on every iteration "
        "whose inputs match no cached variant runs uncompiled. Which ones did is not recorded "
        "here (no tracking backend: the variant shown is the last one that ran), so no period "
        f"is given.{failed} Raise torch._dynamo.config.recompile_limit or stop the guarded "
        "value from changing."
    )
    return Diagnosis("eager-fallback", None, sentence)


def _recompiles(result: ProbeResult, compiled: list[CompileEvent]) -> Optional[Diagnosis]:
    if not result.iterations:
        return None
    last_iteration = result.iterations[-1].iteration
    points = sorted({c.iteration for c in compiled if c.iteration >= 0})
    k = _regular_spacing(points)
    if k is None or (last_iteration - points[-1]) >= 2 * k:
        return None
    cycles, confirmed = len(points), len(points) >= CONFIRMED_CYCLES
    guards = Counter(c.guard for c in compiled if c.guard)
    guard = guards.most_common(1)[0][0] if guards else None
    why = f", each time because a guard failed, e.g. `{guard}`" if guard else ""
    shape = guard is not None and ("size" in guard or "check_tensor" in guard or "stride" in guard)
    fix = (
        "Mark the changing dimension dynamic (torch._dynamo.mark_dynamic, or dynamic=True) "
        "or pad inputs to a few fixed sizes."
        if shape
        else "Keep the guarded value constant, or pass it as a tensor so it is not specialised."
    )
    shown = ", ".join(str(p) for p in points[:8]) + (", ..." if len(points) > 8 else "")
    sentence = (
        f"True recompiles every {k} iterations: {_functions(compiled)} compiled at iterations "
        f"{shown} ({len(compiled)} compiles){why}{_confidence(k, cycles, confirmed)}. {fix}"
    )
    return Diagnosis("recompiles", k, sentence, cycles, confirmed)


def _gapped_label_period(its: Sequence[Iteration]) -> Optional[tuple[int, list[str], int]]:
    """``(k, the cycle from the first iteration on, cycles seen)``: the smallest k >= 2 for which
    each iteration's variant is decided by its number modulo k, every residue seen at least
    twice, over iterations with gaps (a profiler's repeating windows record 3 of every 5).

    The contiguous tail of such windows is shorter than two cycles, and the slow phase then read
    as work unrelated to compilation while the variant changed in step with it."""
    known = [(it.iteration, it.variant) for it in its if it.variant and it.variant != "?"]
    if len({v for _, v in known}) < 2:
        return None
    for k in range(2, len(known) // 2 + 1):
        by_residue: dict[int, set[str]] = {}
        seen: Counter[int] = Counter()
        for i, v in known:
            by_residue.setdefault(i % k, set()).add(v)
            seen[i % k] += 1
        if len(by_residue) == k and all(len(vs) == 1 for vs in by_residue.values()):
            if min(seen.values()) >= 2 and len({next(iter(vs)) for vs in by_residue.values()}) > 1:
                first = known[0][0]
                cycle = [next(iter(by_residue[(first + j) % k])) for j in range(k)]
                return k, cycle, min(seen.values())
    return None


def _cycling(result: ProbeResult, compiled: list[CompileEvent]) -> Optional[Diagnosis]:
    last = max((c.iteration for c in compiled), default=-1)
    after = [it for it in result.iterations if it.iteration > last]
    tail = _contiguous_tail(after)
    labels = [it.variant or "?" for it in tail]
    k = label_period(labels)
    if k is not None:
        cycles, confirmed = _label_cycles(labels, k)
        cycle = labels[:k]
    else:
        gapped = _gapped_label_period(after)
        if gapped is None:
            return None
        k, cycle, cycles = gapped
        confirmed = cycles >= LABEL_CONFIRMED_CYCLES
    steady = steady_iterations(result.iterations)
    per_variant: dict[str, list[float]] = {}
    for it in steady:
        per_variant.setdefault(it.variant or "?", []).append(own_ms(it))
    speeds = {v: median(ms) for v, ms in per_variant.items() if v in cycle}
    speed = ""
    if len(speeds) >= 2:
        slow = max(speeds, key=speeds.__getitem__)
        fast = min(speeds, key=speeds.__getitem__)
        speed = (
            f"; variant {slow} is the slowest ({_ms(speeds[slow])} median against "
            f"{_ms(speeds[fast])} for {fast})"
        )
    differ = sorted(
        {
            g
            for v in result.guards
            if v.compile_id in {x for label in cycle for x in label.split("+")}
            for g in v.only_here
        },
        key=lambda g: (g.startswith("___"), g),
    )
    guards = f" They differ on guards {', '.join(f'`{g}`' for g in differ[:3])}." if differ else ""
    sentence = (
        f"Cycling among {len(set(cycle))} cached variants every {k} iterations: nothing "
        f"compiles after iteration {last}, and the variants {' -> '.join(cycle)} run in turn"
        f"{speed}{_confidence(k, cycles, confirmed)}.{guards} This is not a recompile: every variant stays "
        "cached and Dynamo picks one by its guards, so the period is the value that cycles."
    )
    return Diagnosis("cycling", k, sentence, cycles, confirmed)


def busy_share(iterations: Sequence[Iteration]) -> Optional[float]:
    """The share of ``iterations``' wall time spent waiting for a core another process held.

    None when an iteration's wait is unknown (a profiler trace, no scheduler statistics).
    """
    if not iterations or any(it.waited_ms is None for it in iterations):
        return None
    wall = sum(it.ms for it in iterations)
    return sum(it.waited_ms or 0.0 for it in iterations) / wall if wall > 0 else 0.0


def own_ms(it: Iteration) -> float:
    """The iteration's wall time less the time it waited for a core another process held.

    What the iteration would take on a machine the probe had to itself: its CPU work, and
    everything it waits for (I/O, a sleep, a device, another rank), but not its neighbours.
    A neighbour that takes the core every few iterations puts its own period in wall time,
    and a busy one drowns a real period in noise; neither reaches this clock. It is the wall
    time where the wait is unknown (a profiler trace, no scheduler statistics).
    """
    return it.ms - it.waited_ms if it.waited_ms is not None else it.ms


def _busy(steady: Sequence[Iteration], threads: Optional[int] = None) -> str:
    """`` (other processes held the cores for 43% of the run's wall time)`` when that is BUSY_SHARE or more.

    With several intra-op threads the probing thread also waits, off the run queue, for a
    worker that waits for a core; that wait stays in its own time, so the note says so.
    """
    share = busy_share(steady)
    if share is None or share < BUSY_SHARE:
        return ""
    shared = (
        f"; on {threads} intra-op threads some of that stays in the iterations' own time, "
        "torch.set_num_threads(1) gives a clean clock"
        if threads is not None and threads > 1
        else ""
    )
    return (
        f" (other processes held the cores for {100 * share:.0f}% of the run's wall time{shared})"
    )


def _unrelated(result: ProbeResult) -> Optional[Diagnosis]:
    steady = steady_iterations(result.iterations)
    times = [own_ms(it) for it in steady]
    found = find_time_period([it.iteration for it in steady], times)
    if found is None:
        return None
    k = found.period
    phases = phase_medians([it.iteration for it in steady], times, k)
    slow = found.phase
    rest = median(v for p, v in phases.items() if p != slow)
    pct = 100.0 * (phases[slow] - rest) / rest if rest else 0.0
    variants = sorted({it.variant or "?" for it in steady})
    sentence = (
        f"Periodic work unrelated to compilation: every {_nth(k)} iteration (iteration % {k} == "
        f"{slow}) takes {_ms(phases[slow])} against {_ms(rest)} ({pct:.0f}% slower), while "
        f"the same compiled variant{'s' if len(variants) > 1 else ''} {', '.join(variants)} "
        f"run{'' if len(variants) > 1 else 's'} and nothing recompiles after warm-up{_busy(steady, result.threads)}. Look for work on a schedule: an optimizer "
        f"step at a gradient-accumulation boundary, logging, checkpointing; {found.describe()}."
    )
    return Diagnosis("unrelated", k, sentence, found.cycles, found.confirmed)


def diagnose(result: ProbeResult) -> Diagnosis:
    """The period and its cause, testing the causes in the order the module docstring gives.

    That no compiled graph ran is a fact about the run, not about its period: it is said
    whichever cause is found, so no timing can hide it.
    """
    found = _cause(result)
    eager = _ran_eagerly(result)
    return replace(found, sentence=f"{found.sentence}{eager}") if eager else found


def _ran_eagerly(result: ProbeResult) -> str:
    """The sentence saying no compiled graph ran, or "" (it is known only from the tracking backend)."""
    if result.variant_source == "tracking backend" and not any(
        it.variants for it in result.iterations
    ):
        return " No compiled graph ran in any iteration: the graph breaks left nothing to compile, so the model ran eagerly."
    return ""


def _cause(result: ProbeResult) -> Diagnosis:
    limits = [c for c in result.compiles if c.failed and "Limit" in c.failed]
    compiled = [c for c in result.compiles if not c.failed]
    for test in (
        lambda: _fallback(result, limits),
        lambda: _recompiles(result, compiled),
        lambda: _cycling(result, compiled),
        lambda: _unrelated(result),
    ):
        found = test()
        if found is not None:
            return found
    steady = steady_iterations(result.iterations)
    flat = (
        f"; steady time {_ms(median(own_ms(it) for it in steady))} per iteration{_busy(steady, result.threads)}"
        if steady
        else ""
    )
    last = max((c.iteration for c in compiled if c.iteration >= 0), default=None)
    when = f", the last at iteration {last}" if last is not None else ""
    breaks = sorted({g.reason for g in result.graph_breaks})
    named = f" ({'; '.join(breaks[:2])})" if breaks else ""
    sentence = (
        f"No period: {len(compiled)} compile{'s' if len(compiled) != 1 else ''}{when}, "
        f"{len(breaks)} distinct graph break{'s' if len(breaks) != 1 else ''}{named}{flat}."
    )
    return Diagnosis("steady", None, sentence)


__all__ = [
    "LABEL_CONFIRMED_CYCLES",
    "BUSY_SHARE",
    "busy_share",
    "own_ms",
    "steady_iterations",
    "diagnose",
]
