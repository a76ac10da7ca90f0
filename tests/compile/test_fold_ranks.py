"""Ranks folded by compile story, and the words that name them: the pure part of reading a job of
thousands of ranks (no process, no file)."""

from __future__ import annotations

from pathlib import Path

from explorer.compile.analysis.fold import differences, fold, ranges, stall, told, who
from explorer.compile.analysis.job import CompileJob, Unread, _missing
from explorer.compile.analysis.story import RankStory, story_key
from explorer.compile.printout import job_document, job_report
from explorer.compile.traces.records import CompileEvent, GraphBreak

FIRST = CompileEvent("0/0", -1, "forward", seconds=2.0)
GUARD = "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 6"
EXTRA = CompileEvent("0/1", -1, "forward", reason=GUARD, reasons=(GUARD,), seconds=5.0)


def story(rank: int, *compiles: CompileEvent, seconds: float = 2.0, **kw) -> RankStory:
    fields = dict(
        iterations=0, profiled=False, cause="steady", period=None, confidence=None, sentence="ok"
    )
    fields.update(kw)
    return RankStory(rank, compiles or (FIRST,), (), seconds=seconds, **fields)


def test_ranks_fold_into_ranges_and_the_shorter_of_two_ways_to_say_them() -> None:
    assert ranges([5, 0, 1, 2, 7, 8]) == [(0, 2), (5, 5), (7, 8)]
    assert who([3]) == "rank 3" and who([0, 1, 2, 5]) == "ranks 0-2, 5"
    everyone = range(4096)
    majority = [r for r in everyone if r not in (517, 2048, 3000)]
    assert who(majority, everyone) == "ranks 0-4095 but 517, 2048, 3000"
    assert who([517, 2048], everyone) == "ranks 517, 2048"


def test_thousands_of_scattered_ranks_are_never_listed_one_by_one() -> None:
    text = who(range(0, 8192, 2))
    assert len(text) < 120 and "4088 more ranks" in text, text


def test_like_ranks_are_one_group_and_the_outlier_is_named_with_its_guard() -> None:
    stories = [story(r) for r in range(1024) if r != 517] + [story(517, FIRST, EXTRA, seconds=7.0)]
    groups = fold(stories)
    assert [len(g.ranks) for g in groups] == [1023, 1]
    assert groups[1].ranks == [517] and groups[0].story.rank == 0
    said = differences(groups[1].story, groups[0].story)
    assert said == [
        "also compiled 0/1 at an unknown iteration (forward) on guard tensor 'x' size mismatch "
        "at index 0. expected 4, actual 6"
    ]
    assert "waits about 5 s" in (stall(groups[1], groups[0]) or "")
    assert told(groups[0].story) == "compiled 0/0 at an unknown iteration (forward)"


def test_what_differs_between_healthy_processes_does_not_split_a_story() -> None:
    """Compile seconds, cache answers and object addresses in guards are each process's own."""
    a = CompileEvent("0/1", -1, "f", reason="___check_obj_id(L['m'], 140234551)", cache=("hit",))
    b = CompileEvent("0/1", -1, "f", reason="___check_obj_id(L['m'], 139871002)", cache=("miss",))
    assert story_key(story(0, a, seconds=1.0), False) == story_key(story(1, b, seconds=9.0), False)


def test_iterations_count_only_when_every_rank_was_profiled() -> None:
    at3 = CompileEvent("0/1", 3, "f", reason=GUARD, reasons=(GUARD,))
    unknown = CompileEvent("0/1", -1, "f", reason=GUARD, reasons=(GUARD,))
    mixed = [story(0, at3, profiled=True, iterations=10), story(1, unknown)]
    assert len(fold(mixed)) == 1
    at5 = CompileEvent("0/1", 5, "f", reason=GUARD, reasons=(GUARD,))
    both = [
        story(0, at3, profiled=True, iterations=10),
        story(1, at5, profiled=True, iterations=10),
    ]
    groups = fold(both)
    assert len(groups) == 2
    assert differences(groups[1].story, groups[0].story) == [
        "compiled 0/1 at iteration 5 (the others at 3)"
    ]


def test_a_missing_compile_and_a_graph_break_are_said_both_ways() -> None:
    broke = RankStory(
        9,
        (FIRST,),
        (GraphBreak("0/0", -1, "call to graph_break()"),),
        0,
        False,
        "steady",
        None,
        None,
        "ok",
        2.0,
    )
    assert differences(broke, story(0, FIRST, EXTRA)) == [
        "did not compile 0/1",
        "also broke the graph: call to graph_break()",
    ]


def _job() -> CompileJob:
    stories = [story(r) for r in range(4096) if r not in (517, 2048)]
    stories += [story(517, FIRST, EXTRA, seconds=7.0), story(2048, FIRST, EXTRA, seconds=7.0)]
    unread = [Unread(r, "not read (interrupted)") for r in range(4096, 4100)]
    unread.append(Unread(7, "its log ends in a cut line", 1))
    return CompileJob(Path("job"), 4100, fold(stories), unread, interrupted=True, workers=2)


def test_the_report_names_the_majority_once_and_the_outliers_by_range() -> None:
    text = job_report(_job())
    lines = text.splitlines()
    assert lines[1].startswith("ranks 0-4095 but 517, 2048 (4094 ranks): compiled 0/0"), lines[1]
    assert lines[2].startswith("ranks 517, 2048 also compiled 0/1"), lines[2]
    assert "not read in full: ranks 4096-4099: not read (interrupted)" in lines
    assert (
        "not read in full: rank 7: its log ends in a cut line (its 1 compiles before that are read)"
        in lines
    )
    assert "interrupted (Ctrl-C)" in text and len(text) < 3000


def test_the_json_keeps_each_group_as_rank_ranges() -> None:
    doc = job_document(_job())
    assert doc["folded"] and doc["ranks"] == 4100 and doc["read"] == 4096
    assert doc["groups"][0]["ranks"] == [[0, 516], [518, 2047], [2049, 4095]]
    assert doc["groups"][1]["ranks"] == [[517, 517], [2048, 2048]]
    assert doc["groups"][1]["differs"][0].startswith("also compiled 0/1")
    assert {"ranks": [[4096, 4099]], "why": "not read (interrupted)"} in doc["unread"]


def test_a_stray_log_of_a_far_bigger_job_is_one_entry_not_billions() -> None:
    gap = _missing(4_000_000_001, set(range(10)) | {4_000_000_000})
    assert len(gap) == 1 and gap[0].rank == 10 and "3999999989 more ranks" in gap[0].why
    assert [u.rank for u in _missing(8, {0, 1, 2, 5, 7})] == [3, 4, 6]
