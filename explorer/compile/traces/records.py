"""Typed records of one probe run: iterations, compile events, graph breaks, variants.

The probe, the diagnosis, the views, the widget, the CLI's ``--json`` and the tests all read
these same records, so every one of them speaks the same vocabulary (``compile_id`` like
``0/1``: frame 0, attempt 1). Pure python: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from explorer.failure import Failure

#: The variant label of a frame that ran eagerly because it hit the recompile limit.
EAGER = "eager"
#: The iteration of a record whose iteration is not known (a TORCH_TRACE read without a profiler trace).
UNKNOWN = -1
#: The failure type of a frame that gave up recompiling and runs eagerly from then on.
LIMIT_FAILURE = "RecompileLimitExceeded"


def limit_failure(failed: Optional[str], detail: Optional[str]) -> Optional[str]:
    """Name every flavour of 'gave up recompiling' the same way (Dynamo's wording varies by release)."""
    text = f"{failed or ''} {detail or ''}".lower()
    if "limit" in text and ("recompile" in text or "cache" in text):
        return LIMIT_FAILURE
    return failed


def frame_of(compile_id: str) -> str:
    """The frame part of a compile id: ``"0/2"`` -> ``"0"`` (a retry suffix like ``0/2_1`` is kept out)."""
    return compile_id.split("/", 1)[0]


@dataclass(frozen=True)
class CompileEvent:
    """One compile attempt of one frame, as Dynamo recorded it.

    ``reason`` is the guard failure that forced a recompile (``None`` for a frame's first
    compile); ``reasons`` every guard that failed, one per cached variant Dynamo tried (the
    structured trace keeps them all, ``TORCH_LOGS=recompiles`` shows only the first);
    ``failed`` is Dynamo's failure type (``RecompileLimitExceeded`` when the frame gave up and
    runs eagerly from then on). ``iteration`` is :data:`UNKNOWN` when no record tells it.
    ``cache`` names the compile caches' answers (``fx_graph_cache_hit``); ``ranks`` the ranks
    that made this compile, in a report merged over ranks.
    """

    compile_id: str
    iteration: int
    function: Optional[str] = None
    reason: Optional[str] = None
    failed: Optional[str] = None
    seconds: Optional[float] = None
    reasons: tuple[str, ...] = ()
    cache: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()

    @property
    def frame(self) -> str:
        """The frame id, shared by all attempts of one function."""
        return frame_of(self.compile_id)

    def what_json(self) -> dict[str, Any]:
        """What this compile was, for JSON: without what it cost or which ranks made it (the
        fields a job's compile stories are compared by)."""
        return {
            "compile_id": self.compile_id,
            "iteration": self.iteration,
            "function": self.function,
            "reason": self.reason,
            "reasons": list(self.reasons or ([self.reason] if self.reason else [])),
            "failed": self.failed,
        }

    @property
    def guard(self) -> Optional[str]:
        """The failing guard alone (``s.mode == 0``), without the ``0/0:`` prefix and source comment."""
        if not self.reason:
            return None
        first = self.reason.strip().splitlines()[0]
        head, _, rest = first.partition(": ")
        text = rest if rest and "/" in head and " " not in head else first
        return text.split("#", 1)[0].strip() or text.strip()


@dataclass(frozen=True)
class GraphBreak:
    """A graph break: Dynamo split the frame and resumed in a new one. ``reason`` is the first line.

    A break is logged at every compile of its frame; read from a trace they are kept once per
    reason, with ``compile_ids`` every compile that logged it and ``ranks`` the ranks that did.
    """

    compile_id: Optional[str]
    iteration: int
    reason: str
    detail: str = ""
    compile_ids: tuple[str, ...] = ()
    ranks: tuple[int, ...] = ()


@dataclass(frozen=True)
class Iteration:
    """One training iteration: wall time, whether it compiled, and which compiled variants ran.

    ``variants`` lists the compile ids whose graphs ran (one per frame, the last one when a
    frame ran several); a frame that fell back to eager shows as ``"eager"``. ``fallback`` is
    ``None`` when the probe could not tell (no tracking backend after the limit was hit).
    ``cpu_ms`` is the CPU time every thread of the process spent in the iteration and
    ``waited_ms`` the time the probing thread was ready to run but waited for a core another
    process held; both ``None`` where unmeasured (a profiler trace, a system without
    scheduler statistics). On a busy machine ``ms`` grows by ``waited_ms``, which is why the
    diagnosis reads periods from ``ms - waited_ms``, the time the iteration would take alone.
    ``synchronized`` is True when the probe waited for the GPU before taking the end time, so
    ``ms`` is the device's work, and False when there was nothing to wait for (no CUDA
    initialised: CPU work is timed by itself); ``None`` where unknown (a profiler trace).
    """

    iteration: int
    ms: float
    compiled: bool
    variants: tuple[str, ...] = ()
    fallback: Optional[bool] = False
    cpu_ms: Optional[float] = None
    waited_ms: Optional[float] = None
    synchronized: Optional[bool] = None

    @property
    def variant(self) -> Optional[str]:
        """The variants as one label (``0/2`` or ``0/1+1/0``), ``None`` when nothing was seen."""
        return "+".join(self.variants) if self.variants else None


#: The structured-trace artifact in which ``compile-probe`` writes each iteration it recorded
#: (when ``TORCH_TRACE`` is on), so that ``read`` of that trace has the probe's own iterations.
PROBE_ARTIFACT = "explorer_probe_iteration"


def probe_record(
    it: Iteration, compile_ids: list[str], recompile_limit: Optional[int], threads: Optional[int]
) -> dict[str, Any]:
    """What the probe writes into the trace for one iteration (see :data:`PROBE_ARTIFACT`): the
    iteration as recorded, the compiles drained in it, and the run's limit and threads."""
    return {
        "iteration": it.iteration,
        "ms": it.ms,
        "compiled": it.compiled,
        "variants": list(it.variants),
        "fallback": it.fallback,
        "cpu_ms": it.cpu_ms,
        "waited_ms": it.waited_ms,
        "synchronized": it.synchronized,
        "compiles": list(compile_ids),
        "recompile_limit": recompile_limit,
        "threads": threads,
    }


#: The artifact in which ``compile-probe`` opens and closes its run in the trace: at the start
#: the iterations it was asked for, at the end how many it recorded and the failure that ended
#: it. Without them ``read`` of a run whose step raised, exited or was killed, or of a trace cut
#: between two records, saw only the iterations before and called them clean.
PROBE_RUN_ARTIFACT = "explorer_probe_run"


def probe_run_record(
    event: str,
    iterations: int,
    backend: str = "",
    failure: Optional[dict[str, Any]] = None,
    job: str = "",
    world: int = 1,
) -> dict[str, Any]:
    """What the probe writes at its run's ``start`` (iterations asked for, backend, the job's id
    and its number of ranks) and ``end`` (iterations recorded, the failure that ended it or
    None); see :data:`PROBE_RUN_ARTIFACT`. The job's id and size let ``read`` refuse one
    rank's trace of another job beside this one's, and name a rank whose trace is missing."""
    doc: dict[str, Any] = {"event": event, "iterations": iterations}
    if event == "start":
        doc.update(backend=backend, job=job, world=world)
    else:
        doc["failure"] = failure
    return doc


def _number(value: Any) -> Optional[float]:
    """A duration in a record: a finite number of milliseconds, never negative (a record with
    ``"ms": -5`` was taken and printed as ``-5.00``)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and value == value and 0 <= value < 1e15 else None


def iteration_of_record(doc: Any) -> Optional[tuple[Iteration, tuple[str, ...]]]:
    """The iteration and its compile ids from one :func:`probe_record` read back from a trace,
    or None when the record is not one (a file is input: every field is checked)."""
    if not isinstance(doc, dict):
        return None
    i, ms = doc.get("iteration"), _number(doc.get("ms"))
    variants, compiles = doc.get("variants"), doc.get("compiles")
    fallback, synchronized = doc.get("fallback"), doc.get("synchronized")
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < 10**9 or ms is None:
        return None
    if not isinstance(doc.get("compiled"), bool):
        return None
    if not isinstance(variants, list) or not all(isinstance(v, str) for v in variants):
        return None
    if not isinstance(compiles, list) or not all(isinstance(c, str) for c in compiles):
        return None
    if fallback not in (True, False, None) or synchronized not in (True, False, None):
        return None
    it = Iteration(
        i,
        ms,
        doc["compiled"],
        tuple(variants),
        fallback,
        _number(doc.get("cpu_ms")),
        _number(doc.get("waited_ms")),
        synchronized,
    )
    return it, tuple(compiles)


@dataclass(frozen=True)
class VariantGuards:
    """The guards of one cached variant that its siblings of the same frame do not share."""

    compile_id: str
    function: str
    only_here: tuple[str, ...]


@dataclass(frozen=True)
class Diagnosis:
    """The detected period and its cause, in one sentence a user can act on.

    ``cause`` is one of ``recompiles``, ``cycling``, ``eager-fallback``, ``unrelated``,
    ``steady``. ``cycles`` is how often the period was seen and ``confirmed`` whether that is
    enough to call it confirmed (``False``: seen, but run more iterations to be sure).
    """

    cause: str
    period: Optional[int]
    sentence: str
    cycles: Optional[int] = None
    confirmed: Optional[bool] = None

    @property
    def confidence(self) -> Optional[str]:
        """``confirmed``, ``tentative`` or None (no period)."""
        if self.period is None or self.confirmed is None:
            return None
        return "confirmed" if self.confirmed else "tentative"


@dataclass
class ProbeResult:
    """Everything one probe run saw, ready for the diagnosis and the views."""

    iterations: list[Iteration]
    compiles: list[CompileEvent] = field(default_factory=list)
    graph_breaks: list[GraphBreak] = field(default_factory=list)
    guards: list[VariantGuards] = field(default_factory=list)
    backend: str = ""
    source: str = ""
    variant_source: str = ""
    recompile_limit: Optional[int] = None
    diagnosis: Optional[Diagnosis] = None
    label: str = ""
    #: Why the probe stopped early (the step raised, a rank died or timed out); None: it ran through.
    failure: Optional[Failure] = None
    ranks: list[dict[str, Any]] = field(default_factory=list)
    divergence: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: Intra-op threads the step ran on (None: not known, e.g. read from a trace).
    threads: Optional[int] = None

    @property
    def error(self) -> Optional[str]:
        """The failure's one line (the JSON document's ``error``), None when the probe ran through."""
        return self.failure.message if self.failure is not None else None

    @property
    def exit_code(self) -> int:
        """The verdict compile-probe (and ``read`` of a job's traces) exits with, and the
        document's ``ok``: 0 when the loop ran through and nothing periodic or recompiling was
        found, 1 otherwise."""
        d = self.diagnosis
        return 0 if self.failure is None and (d is None or d.cause == "steady") else 1

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` document (the shape issue 7 specifies, plus a few extra keys).

        ``ranks`` (one summary per rank), ``divergence`` (sentences on what ranks did
        differently) and ``notes`` (what the records cannot tell) appear when a report was
        merged over ranks or read from a job's traces.
        """
        diagnosis = self.diagnosis
        doc: dict[str, Any] = {
            "kind": "compile",
            "ok": self.exit_code == 0,
            "error": self.error,
            "failure": self.failure.to_dict() if self.failure else None,
            "label": self.label,
            "backend": self.backend,
            "source": self.source,
            "threads": self.threads,
            "iterations": [
                {
                    "iteration": it.iteration,
                    "ms": round(it.ms, 4),
                    "cpu_ms": None if it.cpu_ms is None else round(it.cpu_ms, 4),
                    "waited_ms": None if it.waited_ms is None else round(it.waited_ms, 4),
                    "compiled": it.compiled,
                    "variant": it.variant,
                    "fallback": it.fallback,
                    "synchronized": it.synchronized,
                }
                for it in self.iterations
            ],
            "compiles": [
                {
                    **c.what_json(),
                    "seconds": None if c.seconds is None else round(c.seconds, 6),
                    "cache": list(c.cache),
                    "ranks": list(c.ranks),
                }
                for c in self.compiles
            ],
            "graph_breaks": [
                {
                    "compile_id": g.compile_id,
                    "iteration": g.iteration,
                    "reason": g.reason,
                    "compile_ids": list(g.compile_ids or ([g.compile_id] if g.compile_id else [])),
                    "ranks": list(g.ranks),
                }
                for g in self.graph_breaks
            ],
            "guards": [
                {"compile_id": g.compile_id, "function": g.function, "only_here": list(g.only_here)}
                for g in self.guards
            ],
            "period": diagnosis.period if diagnosis else None,
            "cycles": diagnosis.cycles if diagnosis else None,
            "confidence": diagnosis.confidence if diagnosis else None,
            "cause": diagnosis.cause if diagnosis else None,
            "diagnosis": diagnosis.sentence if diagnosis else "",
        }
        if self.ranks or self.divergence or self.notes:
            doc.update(ranks=self.ranks, divergence=self.divergence, notes=self.notes)
        return doc


__all__ = [
    "EAGER",
    "UNKNOWN",
    "LIMIT_FAILURE",
    "limit_failure",
    "frame_of",
    "CompileEvent",
    "GraphBreak",
    "Iteration",
    "VariantGuards",
    "Diagnosis",
    "ProbeResult",
]
