"""The ``question`` directive: a question whose right answer is what the analyses say.

A question is one of two shapes in the page: ``choice`` (buttons, each option marked right or
wrong at build time, with the analysis' words on it) or ``cell`` (click a cell of a grid; the
right cells are where the finding is). The page compares the student's answer with these
marks and shows the note and the teacher's explanation; it decides nothing itself. The
``ask:`` line picks what is asked:

==================  ======  ==============================================================
``first-hazard``    cell    the first instruction that reads the wrong buffer (``setup``, ``size``)
``smallest-failing`` choice the smallest broken size over ``stages`` x ``microbatches``; options are sizes
``clean``           choice  which ``option:`` set-ups are clean over the range (no finding at any size)
``least-bubble``    choice  which ``option:`` set-ups (each at ``size`` or ``@ PxM``) idle least
``bubble-under``    choice  the fewest micro-batches (of the options) whose bubble is under ``under``
``first-recompile`` choice  (with ``run:``) which iteration recompiled first
``limit-hit``       choice  (with ``run:``) at which iteration the recompile limit was hit
``recompile-guard`` choice  (with ``run:``) which guard failed at the first recompile
==================  ======  ==============================================================
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from explorer.lessons.explore import checked_state
from explorer.lessons.markdown import to_html
from explorer.lessons.recorded import RECORDED_QUESTIONS, recorded_question
from explorer.lessons.setups import parse_range, parse_setup, parse_size, report, schedule_of
from explorer.lessons.source import Directive
from explorer.lessons.store import FigureStore


def question_block(d: Directive, store: Optional[FigureStore], number: int) -> dict[str, Any]:
    """The question's data for the page (figures only with a ``store``)."""
    ask = d.need("ask")
    if ask in RECORDED_QUESTIONS:
        body = recorded_question(d, ask, store)
    elif ask in ASKS:
        body = ASKS[ask](d, store)
    else:
        raise d.fail(f"ask: {ask!r} is not one of {', '.join([*ASKS, *RECORDED_QUESTIONS])}")
    if not d.prompt:
        raise d.fail("a question needs a prompt: a paragraph after the first blank line")
    return {
        "type": "question",
        "id": f"q{number}",
        "ask": ask,
        "prompt": to_html(d.prompt),
        "explain": to_html(d.explain),
        **body,
    }


def _first_hazard(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """Click the first instruction that reads the wrong buffer: the hazard with the lowest step."""
    from explorer.pipeline import findings_by_cell, grid_figure

    setup = parse_setup(d.need("setup"), d.where)
    p, m = parse_size(d.need("size"), d.where)
    rep = report(setup, p, m)
    hazards = sorted(rep.findings.hazards, key=lambda h: (h.step, h.stage))
    if not hazards:
        raise d.fail(f"{setup.spec} at {p}x{m} has no hazard to click: pick a size that has one")
    first = hazards[0]
    answer = [[h.stage, h.step] for h in hazards if h.step == first.step]
    return {
        "mode": "cell",
        "figure": store.add(grid_figure(rep)) if store is not None else -1,
        "answer": answer,
        "right_note": first.describe(),
        "cells": {f"{s}/{t}": words for (s, t), words in findings_by_cell(rep).items()},
        "input": {"setup": setup.spec, "size": [p, m]},
    }


def _smallest_failing(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """Options are sizes; right is the sweep's smallest failing size (fewest stages, then micro-batches)."""
    from explorer.pipeline import SizeAsking, check_sizes

    setup = parse_setup(d.need("setup"), d.where)
    stages = parse_range(d.need("stages"), d.where, "stages")
    mbs = parse_range(d.need("microbatches"), d.where, "microbatches")
    sweep = check_sizes(
        lambda p, m: schedule_of(setup, p, m),
        stages,
        mbs,
        asking=SizeAsking(model=setup.model),  # type: ignore[arg-type]
    )
    worst = sweep.smallest_failing
    if worst is None:
        raise d.fail(f"{setup.spec} is clean over the range: no size breaks, nothing to ask")
    cells = {(c.stages, c.microbatches): c for c in sweep.cells}
    options = []
    for text in d.all("option"):
        p, m = parse_size(text, d.where)
        cell = cells.get((p, m))
        if cell is None:
            raise d.fail(f"option {text} is outside the range {sweep.spec}")
        note = cell.skipped or cell.first_words or "clean at this size"
        right = (p, m) == (worst.stages, worst.microbatches)
        options.append(
            {
                "label": f"{p} stages × {m} micro-batches",
                "size": [p, m],
                "right": right,
                "note": note,
            }
        )
    _need_a_right_option(d, options, f"{worst.stages}x{worst.microbatches}")
    return {
        "mode": "choice",
        "options": options,
        "input": {"setup": setup.spec, "stages": stages, "microbatches": mbs},
    }


def _clean(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """Options are set-ups; right are those with no finding at any size of the range."""
    stages = parse_range(d.need("stages"), d.where, "stages")
    mbs = parse_range(d.need("microbatches"), d.where, "microbatches")
    options = []
    for text in d.all("option"):
        setup = parse_setup(text, d.where)
        first_bad, checked = _first_bad(setup, stages, mbs, d)
        refused = len(stages) * len(mbs) - checked
        options.append(
            {
                "label": setup.label,
                "spec": setup.spec,
                "right": first_bad is None,
                "note": first_bad
                or f"no finding at any of {checked} sizes"
                + (f" ({refused} sizes of the range the kind does not take)" if refused else ""),
            }
        )
    _need_a_right_option(d, options, "a clean set-up")
    return {
        "mode": "choice",
        "options": options,
        "input": {"stages": stages, "microbatches": mbs},
    }


def _first_bad(
    setup: Any, stages: list[int], mbs: list[int], d: Directive
) -> tuple[Optional[str], int]:
    """Words on the smallest size where ``setup`` has a finding (None: clean at every size it
    was checked at), and how many sizes were checked. A size the kind refuses is no evidence of
    cleanness: a set-up refused at every size is the teacher's mistake, said at build time."""
    checked, refusal = 0, ""
    for p in stages:
        for m in mbs:
            _, state = checked_state(setup, p, m)
            if "error" in state:
                refusal = refusal or f"at {p}x{m}: {state['error']}"
                continue
            checked += 1
            if not state["ok"]:
                return f"at {p}x{m}: {state['findings'][0][0]}", checked
    if not checked:
        raise d.fail(
            f"option {setup.spec!r} cannot be checked at any size of the range ({refusal})"
        )
    return None, checked


def _least_bubble(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """Options are set-ups, each at ``size`` or its own ``@ PxM``; right: the smallest simulated bubble."""
    default = d.get("size")
    found = []
    for text in d.all("option"):
        spec, at, size = text.partition(" @ ")
        if not at and not default:
            raise d.fail(f"option {text!r} needs a size: add ' @ 4x8' or a 'size: 4x8' line")
        p, m = parse_size(size if at else default or "", d.where)
        setup = parse_setup(spec, d.where)
        found.append((setup, (p, m), checked_state(setup, p, m)[1]))
    bubbles = [s["bubble"] for _, _, s in found if s.get("bubble") is not None]
    if not bubbles:
        raise d.fail("no option has a timeline (each is refused or deadlocks)")
    least = min(bubbles)
    options = [
        {
            "label": setup.label,
            "spec": setup.spec,
            "size": [p, m],
            "right": state.get("bubble") == least,
            "note": _bubble_words(state),
        }
        for setup, (p, m), state in found
    ]
    return {"mode": "choice", "options": options, "input": {}}


def _is_under(bubble: Optional[float], under: float) -> bool:
    return bubble is not None and bubble < under


def _bubble_under(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """Options are sizes of one set-up; right: the smallest size whose bubble is under ``under``."""
    setup = parse_setup(d.need("setup"), d.where)
    try:
        under = float(d.need("under"))
    except ValueError:
        raise d.fail(f"under: {d.get('under')!r} must be a fraction such as 0.5") from None
    found = []
    for text in d.all("option"):
        p, m = parse_size(text, d.where)
        found.append(((p, m), checked_state(setup, p, m)[1]))
    # a size with no bubble (no timeline: it deadlocks or is refused) is never under; 0.0 is
    below = [size for size, state in found if _is_under(state.get("bubble"), under)]
    if not below:
        raise d.fail(f"no option has a bubble under {under}: add a larger size")
    first = min(below)
    options = [
        {
            "label": f"{m} micro-batches" if len({s[0] for s, _ in found}) == 1 else f"{p}x{m}",
            "size": [p, m],
            "right": (p, m) == first,
            "note": f"{p} stages x {m} micro-batches: {_bubble_words(state)}",
        }
        for (p, m), state in found
    ]
    return {"mode": "choice", "options": options, "input": {"setup": setup.spec, "under": under}}


def _bubble_words(state: dict) -> str:
    b = state.get("bubble")
    if state.get("error"):
        return str(state["error"])
    if b is None:
        return "no timeline: it deadlocks"
    return f"bubble {b:.1%} of the time (makespan {state['makespan']:g} ticks)"


def _need_a_right_option(d: Directive, options: list[dict], right: str) -> None:
    if not options:
        raise d.fail("a choice question needs 'option: ...' lines")
    if not any(o["right"] for o in options):
        raise d.fail(f"none of the options is right: the analyses say {right}; add it as an option")


ASKS: dict[str, Callable[[Directive, Optional[FigureStore]], dict[str, Any]]] = {
    "first-hazard": _first_hazard,
    "smallest-failing": _smallest_failing,
    "clean": _clean,
    "least-bubble": _least_bubble,
    "bubble-under": _bubble_under,
}

__all__ = ["ASKS", "question_block"]
