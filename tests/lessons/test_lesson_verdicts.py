"""Every verdict a lesson stores is what the explorer says for the same input, over the whole range.

A lesson page decides nothing: it shows stored states and compares answers with stored marks.
So the marks must be the explorer's own. The fast test asks the pipeline's public face (the
report's JSON, which ``explorer check --json`` prints) for every state of every explore block
and for every question's options; the slow one asks the command itself, ``explorer check``,
for every state. The recorded compile run is compared with ``explorer read`` of the same files.
"""

from __future__ import annotations

import json

import pytest
from cli_in_process import call_cli
from lesson_reference import (
    agreement,
    check_json,
    cli_check,
    explore_states,
    questions,
    unzip_run,
)


@pytest.fixture(scope="module")
def lessons(lesson_verdicts) -> list[dict]:
    """Every lesson's stored verdicts, in the lessons' order: about 6 s of checks, made once
    per test run (``lesson_verdicts``: the build's and the browser's tests read them too)."""
    return list(lesson_verdicts.values())


def test_the_lessons_cover_the_brief(lessons):
    """Four lessons at least, with a schedule range of 2-8 stages x 1-16 micro-batches among them."""
    assert len(lessons) >= 4
    ranges = {
        (tuple(b["stages"]), tuple(b["microbatches"]))
        for lesson in lessons
        for b in lesson["blocks"]
        if b["type"] == "explore"
    }
    assert (tuple(range(2, 9)), tuple(range(1, 17))) in ranges
    asks = {q["ask"] for _, q in questions(lessons)}
    assert {"first-hazard", "smallest-failing", "clean", "first-recompile"} <= asks


def test_every_stored_state_is_what_check_says(lessons):
    states = list(explore_states(lessons))
    assert len(states) > 700  # every state of every range, not a sample
    wrong = [
        f"{slug}: {spec} at {p}x{m}: {problem}"
        for slug, spec, p, m, state in states
        for problem in agreement(state, check_json(spec, p, m))
    ]
    assert wrong == []


def test_every_block_shows_both_verdicts(lessons):
    """A range whose states all agree would teach nothing: each lesson's explorer has clean and broken (or refused) states."""
    for lesson in lessons:
        for block in lesson["blocks"]:
            if block["type"] == "explore":
                kinds = {("error" if "error" in s else s["ok"]) for s in block["states"].values()}
                assert len(kinds) >= 2, (lesson["slug"], kinds)


def _bubble(spec: str, p: int, m: int):
    ref = check_json(spec, p, m)
    return ref["bubble"]["fraction_of_total"] if isinstance(ref, dict) and ref["bubble"] else None


def _first_broken(spec: str, stages: list[int], mbs: list[int]):
    for p in stages:
        for m in mbs:
            ref = check_json(spec, p, m)
            if isinstance(ref, dict) and not ref["ok"]:
                return (p, m)
    return None


def test_every_question_is_marked_as_check_says(lessons):
    checked = 0
    for slug, q in questions(lessons):
        ask, given = q["ask"], q["input"]
        if ask == "first-hazard":
            ref = check_json(given["setup"], *given["size"])
            assert isinstance(ref, dict)
            first = min(h["step"] for h in ref["hazards"])
            cells = {(h["stage"], h["step"]) for h in ref["hazards"] if h["step"] == first}
            assert {tuple(a) for a in q["answer"]} == cells, slug
            assert ref["hazards"] and q["right_note"] in {h["cause"] for h in ref["hazards"]}
        elif ask == "smallest-failing":
            worst = _first_broken(given["setup"], given["stages"], given["microbatches"])
            assert [o["right"] for o in q["options"]] == [
                tuple(o["size"]) == worst for o in q["options"]
            ], slug
        elif ask == "clean":
            for o in q["options"]:
                clean = _first_broken(o["spec"], given["stages"], given["microbatches"]) is None
                assert o["right"] == clean, (slug, o["label"])
        elif ask == "least-bubble":
            bubbles = [_bubble(o["spec"], *o["size"]) for o in q["options"]]
            least = min(b for b in bubbles if b is not None)
            assert [o["right"] for o in q["options"]] == [b == least for b in bubbles], slug
        elif ask == "bubble-under":
            sizes = [tuple(o["size"]) for o in q["options"]]
            under = [s for s in sizes if (_bubble(given["setup"], *s) or 1.0) < given["under"]]
            assert [o["right"] for o in q["options"]] == [s == min(under) for s in sizes], slug
        else:
            continue  # the recorded run's questions: the test below
        assert sum(o["right"] for o in q.get("options", [])) >= (q["mode"] == "choice")
        checked += 1
    assert checked >= 7


def test_the_recorded_run_questions_are_what_explorer_read_says(lessons, tmp_path):
    asked = [q for _, q in questions(lessons) if q["input"].get("run")]
    assert {q["ask"] for q in asked} == {"first-recompile", "limit-hit", "recompile-guard"}
    run = asked[0]["input"]["run"]
    called = call_cli(["read", str(unzip_run(run, tmp_path)), "--json"])

    report = json.loads(called.stdout)
    recompiles = [c for c in report["compiles"] if c["reason"] and not c["failed"]]
    limit = [c for c in report["compiles"] if c["failed"] == "RecompileLimitExceeded"]
    first_guard = recompiles[0]["reason"].split(": ", 1)[1].split("#", 1)[0].strip()
    expected = {
        "first-recompile": f"iteration {recompiles[0]['iteration']}",
        "limit-hit": f"iteration {limit[0]['iteration']}",
        "recompile-guard": first_guard,
    }
    for q in asked:
        right = [o["label"] for o in q["options"] if o["right"]]
        assert right == [expected[q["ask"]]], q["ask"]
    assert report["cause"] == "eager-fallback"


@pytest.mark.slow  # about a thousand checks through the command's own parser and JSON
def test_every_stored_state_is_what_the_check_command_prints(lessons):
    wrong = [
        f"{slug}: {spec} at {p}x{m}: {problem}"
        for slug, spec, p, m, state in explore_states(lessons)
        for problem in agreement(state, cli_check(spec, p, m))
    ]
    assert wrong == []


def test_the_comparison_catches_a_wrong_state():
    """The agreement check itself: a flipped verdict, a changed bubble or a lost finding is caught."""
    spec = "deepspeed-train buffers=fixed order=legacy"
    ref = check_json(spec, 4, 8)
    assert isinstance(ref, dict) and not ref["ok"]
    state = {
        "ok": False,
        "findings": [[h["cause"], h["stage"], h["step"]] for h in ref["hazards"]],
        "more": 0,
        "bubble": ref["bubble"]["fraction_of_total"],
        "allocated": ref["buffers"]["allocated"],
        "needed": ref["buffers"]["needed"],
    }
    assert agreement(state, ref) == []
    assert agreement({**state, "ok": True}, ref)
    assert agreement({**state, "bubble": 0.1}, ref)
    assert agreement({**state, "findings": state["findings"][1:]}, ref)
    assert agreement({**state, "findings": [["stage 0 step 0: made up", 0, 0]]}, ref)
    assert agreement({"error": "no"}, ref)
