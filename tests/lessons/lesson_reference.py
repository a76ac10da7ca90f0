"""What the explorer itself says about a lesson's inputs, computed apart from the lesson build.

The lesson build reads its set-ups with :mod:`explorer.lessons.setups`; these helpers read the
same ``kind key=value`` words on their own and ask the pipeline's public face
(``build``/``apply_rules``/``check``, the report's JSON as ``explorer check --json`` prints it)
or the command itself, so a lesson that stored a verdict the explorer would not give fails.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any, Iterator, Union

from cli_in_process import call_cli

from explorer.errors import InputError

_FLAGS = {
    "buffers": "--buffers",
    "order": "--order",
    "chunks": "--chunks",
    "rules": "--rules",
    "model": "--model",
}


def words(spec: str) -> tuple[str, dict[str, str]]:
    kind, *rest = spec.split()
    return kind, dict(w.split("=", 1) for w in rest)


def check_json(spec: str, p: int, m: int) -> Union[dict, str]:
    """``check(...).to_dict()`` for ``spec`` at ``p x m``, or the generator's refusal in words."""
    from explorer.pipeline import RULES, apply_rules, build, check

    kind, opts = words(spec)
    buffers: Any = opts.get("buffers")
    try:
        schedule = build(
            kind,  # type: ignore[arg-type]
            p,
            m,
            chunks=int(opts.get("chunks", 1)),
            buffers=int(buffers) if buffers and buffers.isdigit() else buffers,
            order=opts.get("order"),  # type: ignore[arg-type]
        )
    except InputError as exc:
        return str(exc)
    schedule = apply_rules(schedule, [RULES[r] for r in opts.get("rules", "").split(",") if r])
    return check(schedule, model=opts.get("model")).to_dict()  # type: ignore[arg-type]


def cli_check(spec: str, p: int, m: int) -> Union[dict, str]:
    """What ``explorer check ... --json`` prints (exit 0/1), or its one-line refusal (exit 2)."""
    kind, opts = words(spec)
    argv = ["check", "--kind", kind, "--stages", str(p), "--microbatches", str(m), "--json"]
    for key, value in opts.items():
        argv += [_FLAGS[key], value]
    called = call_cli(argv)
    if called.returncode == 2:
        return called.stderr.strip()
    assert called.returncode in (0, 1), called.stderr
    return json.loads(called.stdout)


def agreement(state: dict, ref: Union[dict, str]) -> list[str]:
    """Where a stored state differs from the explorer's answer (empty: they agree)."""
    if isinstance(ref, str):
        return (
            []
            if "error" in state and state["error"] in ref
            else [f"stored {state}, check refused: {ref}"]
        )
    if "error" in state:
        return [f"stored a refusal {state['error']!r}, check answered"]
    problems: list[str] = []
    bubble = ref["bubble"]["fraction_of_total"] if ref["bubble"] else None
    listed = [f[0] for f in state["findings"]]
    known = {h["cause"] for h in ref["hazards"]}
    if ref["deadlock"]:
        known.add(ref["deadlock"]["description"])
        if not listed or listed[0] != ref["deadlock"]["description"]:
            problems.append(f"the deadlock is not listed first: {listed[:1]}")
    if not ref["unmatched"] and not ref["mismatched"]:
        strange = [f for f in listed if f not in known and "weight gradient" not in f]
        if strange:
            problems.append(f"findings check does not give: {strange[:2]}")
    counted = (
        len(ref["hazards"]) + len(ref["unmatched"]) + len(ref["mismatched"]) + bool(ref["deadlock"])
    )
    for name, mine, theirs in (
        ("ok", state["ok"], ref["ok"]),
        ("bubble", state["bubble"], bubble),
        ("allocated", state["allocated"], ref["buffers"]["allocated"]),
        ("needed", state["needed"], ref["buffers"]["needed"]),
    ):
        if mine != theirs:
            problems.append(f"{name}: stored {mine}, check says {theirs}")
    if len(listed) + state["more"] < counted:
        problems.append(f"stored {len(listed) + state['more']} findings, check has {counted}")
    return problems


def explore_states(lessons: list[dict]) -> Iterator[tuple[str, str, int, int, dict]]:
    """``(lesson, spec, stages, micro-batches, stored state)`` over every explore block's whole range."""
    for lesson in lessons:
        for block in lesson["blocks"]:
            if block["type"] != "explore":
                continue
            for i, setup in enumerate(block["setups"]):
                for p in block["stages"]:
                    for m in block["microbatches"]:
                        yield lesson["slug"], setup["spec"], p, m, block["states"][f"{i}/{p}/{m}"]


def questions(lessons: list[dict]) -> Iterator[tuple[str, dict]]:
    for lesson in lessons:
        for block in lesson["blocks"]:
            if block["type"] == "question":
                yield lesson["slug"], block


def unzip_run(name: str, into: Path) -> Path:
    """A recorded run's folder as ``explorer read`` expects it (the lesson keeps it gzipped)."""
    from explorer.lessons.recorded import RECORDED

    for path in (RECORDED / name).rglob("*.gz"):
        target = into / path.relative_to(RECORDED / name).with_suffix("")
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return into
