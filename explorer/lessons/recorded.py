"""A real recorded torch.compile run in a lesson: the ``recorded`` directive and its questions.

Recording a run needs torch and takes seconds to minutes, so it is not done at build time: a
run recorded once with the real library (``explorer.compile.record_example_job``: the
``limit`` job, a ``TORCH_TRACE`` and a profiler trace) is kept gzipped under
``content/recorded/<name>/``. The build reads it with the compile product's own reader
(``read_job``), so the iterations, compiles, failed guards and diagnosis the lesson shows are
the ones ``explorer read`` gives for that folder; ``tests/lessons/test_recorded_run.py``
records the job afresh and checks that the answers still hold. ::

    ```recorded
    run: compile-limit
    ```
"""

from __future__ import annotations

import gzip
import html
import shutil
import tempfile
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

from explorer.lessons.source import Directive
from explorer.lessons.store import FigureStore

RECORDED = Path(__file__).resolve().parent / "content" / "recorded"
RECORDED_QUESTIONS = ("first-recompile", "limit-hit", "recompile-guard")
LIMIT_FAILURE = "RecompileLimitExceeded"


def recorded_names() -> list[str]:
    return sorted(p.name for p in RECORDED.iterdir() if p.is_dir()) if RECORDED.is_dir() else []


@lru_cache(maxsize=4)
def read_recorded(name: str, root: Path = RECORDED) -> Any:
    """The run ``name`` as the compile product's ``ProbeResult`` (read from an unzipped copy)."""
    from explorer.compile import read_job

    folder = root / name
    with tempfile.TemporaryDirectory(prefix="explorer-lesson-run-") as tmp:
        for path in folder.rglob("*.gz"):
            target = Path(tmp) / path.relative_to(folder).with_suffix("")
            target.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(path, "rb") as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
        result = read_job(Path(tmp))
    result.label = f"recorded run {name}"  # not the temporary folder: the same page on every build
    return result


def _run(d: Directive) -> Any:
    name = d.need("run")
    if name not in recorded_names():
        raise d.fail(
            f"run: {name!r} is not a recorded run; choose one of {', '.join(recorded_names())}"
        )
    return read_recorded(name)


def recorded_block(d: Directive, store: Optional[FigureStore]) -> dict[str, Any]:
    """The run's per-iteration figure and compile table (the compile product's views) and its diagnosis."""
    result = _run(d)
    figures: list[int] = []
    if store is not None:
        from explorer.compile import compile_table, iteration_figure

        figures = [store.add(iteration_figure(result)), store.add(compile_table(result))]
    diagnosis = result.diagnosis
    return {
        "type": "recorded",
        "run": d.need("run"),
        "figures": figures,
        "diagnosis": html.escape(diagnosis.sentence) if diagnosis else "",
        "cause": diagnosis.cause if diagnosis else "",
    }


def recompiles(result: Any) -> list[Any]:
    """Compiles that replaced a cached variant (a failed guard), the limit's refusal left out."""
    return [c for c in result.compiles if c.reason and not c.failed and c.iteration >= 0]


def recorded_question(d: Directive, ask: str, store: Optional[FigureStore]) -> dict[str, Any]:
    """A choice question over the recorded run; the right option is read from its records."""
    result = _run(d)
    iterations = [it.iteration for it in result.iterations]
    if ask == "recompile-guard":
        return _guard_question(d, result)
    if ask == "first-recompile":
        found = recompiles(result)
        right = found[0].iteration if found else None
        why = (
            f"compile {found[0].compile_id} ran at iteration {right}: {found[0].guard}"
            if found
            else ""
        )
    else:  # limit-hit
        hits = [c for c in result.compiles if c.failed == LIMIT_FAILURE and c.iteration >= 0]
        right = hits[0].iteration if hits else None
        why = (
            f"compile {hits[0].compile_id} failed with {LIMIT_FAILURE} at iteration {right}"
            if hits
            else ""
        )
    if right is None:
        raise d.fail(f"the run {d.need('run')} has nothing to ask {ask} about")
    options = [
        {
            "label": f"iteration {i}",
            "right": i == right,
            "note": why if i == right else _iteration_words(result, i),
        }
        for i in iterations
    ]
    return {"mode": "choice", "options": options, "input": {"run": d.need("run"), "right": right}}


def _iteration_words(result: Any, i: int) -> str:
    it = next(x for x in result.iterations if x.iteration == i)
    ran = ", ".join(it.variants) or "nothing recorded"
    what = (
        "compiled" if it.compiled else "ran " + ("eagerly" if it.fallback else "a cached variant")
    )
    return f"iteration {i} {what} ({ran}, {it.ms:.1f} ms)"


def _guard_question(d: Directive, result: Any) -> dict[str, Any]:
    """Options: every distinct failing guard of the run; right: the first recompile's."""
    found = recompiles(result)
    if not found:
        raise d.fail(f"the run {d.need('run')} has no recompile")
    first = found[0]
    guards = list(dict.fromkeys(g for c in result.compiles for g in _guards_of(c) if g))
    options = [
        {
            "label": g,
            "right": g == first.guard,
            "note": (
                f"compile {first.compile_id} (iteration {first.iteration}) recompiled because {g} failed"
                if g == first.guard
                else "this guard failed too, but not at the first recompile"
            ),
        }
        for g in guards
    ]
    return {
        "mode": "choice",
        "options": options,
        "input": {"run": d.need("run"), "right": first.guard},
    }


def _guards_of(compile_event: Any) -> list[str]:
    """Every failing guard of one compile, read by the record's own ``guard`` (prefix and comment off)."""
    reasons = compile_event.reasons or ((compile_event.reason,) if compile_event.reason else ())
    return [replace(compile_event, reason=r).guard or "" for r in reasons]


__all__ = [
    "RECORDED",
    "RECORDED_QUESTIONS",
    "read_recorded",
    "recompiles",
    "recorded_block",
    "recorded_names",
    "recorded_question",
]
