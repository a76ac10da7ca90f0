"""One call that runs every analysis on a schedule and returns a JSON-ready report.

``check`` is what the CLI's ``explorer check``, the widgets and the notebooks use: P2P
matching, deadlock search under both P2P models, buffer dataflow, needed buffers, the
timeline and its bubble. Findings are typed records (:mod:`.findings`); ``Report.to_dict``
is the CLI's JSON contract.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Sequence, Union

from explorer.errors import InputError
from explorer.pipeline.analysis.buffers import buffer_hazards, needed_buffers, with_minimal_buffers
from explorer.pipeline.analysis.communicators import lazy_communicator_deadlock
from explorer.pipeline.analysis.deadlock import find_deadlock
from explorer.pipeline.analysis.findings import BufferUse, Findings
from explorer.pipeline.analysis.gradients import gradient_counts, gradients_report
from explorer.pipeline.analysis.p2p import Matching, match
from explorer.pipeline.analysis.p2p_models import MODELS, P2PModel, check_model
from explorer.pipeline.analysis.timeline import Costs, Timeline, simulate
from explorer.pipeline.schedules.generators import INFERENCE_BUFFERS, ScheduleKind, generate
from explorer.pipeline.schedules.generators.deepspeed import ExchangeOrder
from explorer.pipeline.schedules.schedule import Schedule, require_compute

#: How two-rank communicators come to be: created up front, or at a pair's first exchange (NCCL).
Communicators = Literal["eager", "lazy"]
COMMUNICATORS: tuple[Communicators, ...] = ("eager", "lazy")


@dataclass(frozen=True)
class Report:
    """Everything known about one schedule."""

    schedule: Schedule
    matching: Matching
    findings: Findings
    buffers: BufferUse
    timeline: Optional[Timeline]  # None when the schedule deadlocks (or was not asked for)
    model: P2PModel
    communicators: Communicators = "eager"

    @property
    def ok(self) -> bool:
        """The verdict: :attr:`Findings.ok`, the one definition every caller reads."""
        return self.findings.ok

    def to_dict(self) -> dict:
        f = self.findings
        s = self.schedule
        return {
            "ok": self.ok,
            "schedule": {
                "kind": s.name,
                "stages": s.num_stages,
                "ranks": s.num_ranks,
                "microbatches": s.num_microbatches,
                "steps": s.num_steps,
                "instructions": len(s),
                "params": {k: _plain(v) for k, v in s.params.items()},
            },
            "p2p_model": self.model,
            "hazards": [h.to_dict() for h in f.hazards],
            "unmatched": [u.to_dict() for u in f.unmatched],
            "mismatched": [m.to_dict() for m in f.mismatched],
            "deadlock": f.deadlock.to_dict() if f.deadlock else None,
            "deadlock_by_model": {m: (d.to_dict() if d else None) for m, d in f.deadlocks.items()},
            "buffers": self.buffers.to_dict(),
            "bubble": self.timeline.bubble.to_dict() if self.timeline else None,
            "peak_activations": list(self.timeline.peak_activations) if self.timeline else None,
            "costs": vars(self.timeline.costs) if self.timeline else None,
            "gradients": gradients_report(s, f.gradients),
            **(
                {
                    "lazy_communicators": {
                        "deadlock": f.communicators.words if f.communicators else None
                    }
                }
                if self.communicators == "lazy"
                else {}
            ),
        }


def check(
    schedule: Schedule,
    costs: Costs = Costs(),
    model: Optional[P2PModel] = None,
    other_model: bool = True,
    timeline: bool = True,
    communicators: Communicators = "eager",
) -> Report:
    """Run every analysis. ``model`` defaults to the schedule's own (``params['p2p']``).

    With ``other_model`` the deadlock search also runs under the other P2P model, so a
    report can say "this PyTorch-style schedule would deadlock with DeepSpeed's blocking P2P".
    Without ``timeline`` the simulation is left to the caller (a sweep simulates many sizes
    together, :mod:`.timelines`); the verdict does not depend on it. With ``communicators=
    "lazy"`` the order in which ranks create their two-rank communicators is checked too.
    Every invariant that decides the verdict runs here and nowhere else, so the single check,
    a sweep's cells and the widgets cannot disagree about one schedule.
    """
    if communicators not in COMMUNICATORS:
        raise ValueError(f"communicators must be one of {COMMUNICATORS}, got {communicators!r}")
    require_compute(schedule)  # where a CSV's order and a class's steps meet: the same refusal
    model = check_model(model or str(schedule.params.get("p2p", "blocking")))
    matching = match(schedule)
    models = MODELS if other_model else (model,)
    deadlocks = {m: find_deadlock(schedule, matching, m) for m in models}
    findings = Findings(
        # in the order they happen, as ``Findings.all()`` and the text name the first one
        hazards=tuple(sorted(buffer_hazards(schedule), key=lambda h: (h.step, h.stage))),
        unmatched=matching.unmatched,
        mismatched=matching.mismatched,
        deadlock=deadlocks[model],
        deadlocks=deadlocks,
        gradients=tuple(gradient_counts(schedule)),
        communicators=lazy_communicator_deadlock(schedule) if communicators == "lazy" else None,
    )
    simulated = (
        simulate(schedule, matching, costs, model) if timeline and not deadlocks[model] else None
    )
    use = BufferUse(allocated=schedule.buffers, needed=tuple(needed_buffers(schedule)))
    return Report(
        schedule=schedule,
        matching=matching,
        findings=findings,
        buffers=use,
        timeline=simulated,
        model=model,
        communicators=communicators,
    )


BufferArg = Union[None, str, int, Sequence[int]]


def build(
    kind: ScheduleKind,
    stages: int,
    microbatches: int,
    *,
    chunks: int = 1,
    buffers: BufferArg = None,
    order: Optional[ExchangeOrder] = None,
) -> Schedule:
    """:func:`explorer.pipeline.schedules.generate` plus the ``minimal`` buffer policy.

    ``minimal`` (the default outside DeepSpeed's kinds) gives every stage exactly the buffers
    its peak of live micro-batches needs.
    """
    if buffers == "minimal" and kind == "deepspeed-inference":
        raise InputError(INFERENCE_BUFFERS)
    if buffers == "minimal" or (buffers is None and not kind.startswith("deepspeed")):
        return with_minimal_buffers(
            generate(kind, stages, microbatches, chunks=chunks, order=order)
        )
    return generate(kind, stages, microbatches, chunks=chunks, buffers=buffers, order=order)


def _plain(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


__all__ = ["Report", "check", "Communicators", "COMMUNICATORS", "BufferArg", "build"]
