"""The ``explore`` directive: a schedule explorer over a range, every state computed at build time.

::

    ```explore
    setup: 0.8.3's buffers, old order = deepspeed-train buffers=fixed order=legacy
    setup: The fix = deepspeed-train buffers=fixed order=fixed
    stages: 2-8
    microbatches: 1-16
    start: 4x8
    show: grid lifetimes sizes
    ```

Each state (set-up x stages x micro-batches) holds the verdict as :func:`verdict` reads it
from the pipeline's ``check`` report (findings in words, each with its cell, the bubble, the
buffers) and the indices of its figures in the lesson's :class:`~.store.FigureStore`, drawn by
the pipeline's own views. A size the schedule kind refuses keeps the generator's message. The
page script only picks the state the controls name and draws what is stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from explorer.errors import InputError
from explorer.lessons.setups import Setup, parse_range, parse_setup, parse_size, report, schedule_of
from explorer.lessons.source import Directive
from explorer.lessons.store import FigureStore

#: Figures an explore block may show, besides the findings list and the status line it always has.
FIGURES = ("grid", "lifetimes", "timeline", "sizes")
#: Findings listed per state; the rest are counted (``explorer check`` lists them all).
MAX_FINDINGS = 40


@dataclass(frozen=True)
class ExploreSpec:
    """What an explore block offers: set-ups, the range, the figures and the state it opens on."""

    setups: tuple[Setup, ...]
    stages: tuple[int, ...]
    microbatches: tuple[int, ...]
    show: tuple[str, ...]
    start: tuple[int, int]


def explore_spec(d: Directive) -> ExploreSpec:
    """Read an explore block's fields (every bad value names the line to fix)."""
    setups = tuple(parse_setup(text, d.where) for text in d.all("setup"))
    if not setups:
        raise d.fail("an explore block needs at least one 'setup: KIND ...' line")
    stages = tuple(parse_range(d.get("stages", "2-8") or "", d.where, "stages"))
    mbs = tuple(parse_range(d.get("microbatches", "1-16") or "", d.where, "microbatches"))
    show = tuple((d.get("show") or "grid").split())
    unknown = [s for s in show if s not in FIGURES]
    if unknown:
        raise d.fail(f"show: {unknown[0]!r} is not one of {', '.join(FIGURES)}")
    start = parse_size(d.get("start") or f"{stages[0]}x{mbs[-1]}", d.where)
    if start[0] not in stages or start[1] not in mbs:
        raise d.fail(f"start: {start[0]}x{start[1]} is outside the range of the block")
    return ExploreSpec(setups, stages, mbs, show, start)


def state_key(setup: int, stages: int, microbatches: int) -> str:
    """The key of one state in the page's table (the script builds the same string)."""
    return f"{setup}/{stages}/{microbatches}"


def verdict(rep: Any) -> dict[str, Any]:
    """What the page shows of one ``check`` report: the verdict, findings with their cells, the
    bubble (``fraction_of_total``, as ``check --json`` says it) and the buffers."""
    found = rep.findings.all()
    timeline = rep.timeline
    return {
        "ok": bool(rep.ok),
        "findings": [
            [f.describe(), int(getattr(f, "stage", -1)), int(getattr(f, "step", -1))]
            for f in found[:MAX_FINDINGS]
        ],
        "more": max(len(found) - MAX_FINDINGS, 0),
        "bubble": timeline.bubble.of_total if timeline is not None else None,
        "makespan": timeline.makespan if timeline is not None else None,
        "allocated": list(rep.buffers.allocated),
        "needed": list(rep.buffers.needed),
    }


def checked_state(setup: Setup, stages: int, microbatches: int) -> tuple[Optional[Any], dict]:
    """``(report, state)`` for one size; a size the kind refuses gives ``(None, {"error": ...})``."""
    try:
        rep = report(setup, stages, microbatches)
    except InputError as exc:
        return None, {"error": str(exc)}
    return rep, verdict(rep)


def explore_block(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """The block's data for the page; without a ``store`` the figures are left out (the tests'
    fast path: verdicts only)."""
    spec = explore_spec(d)
    states: dict[str, dict] = {}
    sizes: list[int] = []
    for i, setup in enumerate(spec.setups):
        for p in spec.stages:
            for m in spec.microbatches:
                rep, state = checked_state(setup, p, m)
                if rep is not None and store is not None:
                    state["figs"] = _figures(rep, spec.show, store)
                states[state_key(i, p, m)] = state
        mine = [states[state_key(i, p, m)] for p in spec.stages for m in spec.microbatches]
        if all("error" in s for s in mine):  # a page of refusals teaches nothing
            raise d.fail(
                f"setup {setup.spec!r} cannot be checked at any size of the block: "
                f"{mine[0]['error']}"
            )
        if "sizes" in spec.show and store is not None:
            sizes.append(store.add(_sizes_figure(setup, spec)))
    return {
        "type": "explore",
        "setups": [{"label": s.label, "spec": s.spec} for s in spec.setups],
        "stages": list(spec.stages),
        "microbatches": list(spec.microbatches),
        "show": list(spec.show),
        "start": [0, *spec.start],
        "states": states,
        "sizes": sizes,
    }


def _figures(rep: Any, show: tuple[str, ...], store: FigureStore) -> dict[str, int]:
    from explorer.pipeline import grid_figure, lifetimes_figure, timeline_figure

    draw = {"grid": grid_figure, "lifetimes": lifetimes_figure, "timeline": timeline_figure}
    return {name: store.add(draw[name](rep)) for name in show if name in draw}


def _sizes_figure(setup: Setup, spec: ExploreSpec) -> Any:
    """The verdict map of the whole range, from the pipeline's own size sweep and view."""
    from explorer.pipeline import SizeAsking, check_sizes, sizes_figure

    sweep = check_sizes(
        lambda p, m: schedule_of(setup, p, m),
        list(spec.stages),
        list(spec.microbatches),
        asking=SizeAsking(model=setup.model),  # type: ignore[arg-type]
    )
    return sizes_figure(sweep, title=f"Every size: {setup.label}")


__all__ = [
    "FIGURES",
    "MAX_FINDINGS",
    "ExploreSpec",
    "checked_state",
    "explore_block",
    "explore_spec",
    "state_key",
    "verdict",
]
