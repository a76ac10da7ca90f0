"""``explorer lesson build``: bad input is one line and exit 2, before any work; a lesson source
a teacher must fix says which file and line. The build itself is exercised by the slow tests."""

from __future__ import annotations

import pytest
from cli_in_process import call_cli

from explorer.lessons.build import MARKER
from explorer.lessons.source import LessonError, parse_lesson


def _refused(called, *words: str) -> None:
    assert called.returncode == 2
    assert called.stdout == ""
    lines = called.stderr.strip().splitlines()
    assert len(lines) == 1, called.stderr
    assert "Traceback" not in called.stderr
    for w in words:
        assert w in lines[0], lines[0]


def test_out_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "lessons.html"
    target.write_text("not a folder")
    _refused(
        call_cli(["lesson", "build", "--out", target]), "is a file, not a folder", "give a folder"
    )
    assert target.read_text() == "not a folder"


def test_out_that_holds_other_files_is_refused(tmp_path):
    (tmp_path / "thesis.tex").write_text("mine")
    _refused(call_cli(["lesson", "build", "--out", tmp_path]), "already holds other files")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thesis.tex"]
    assert not (tmp_path / MARKER).exists()


def test_unknown_lesson_is_refused_with_the_names_to_choose(tmp_path):
    called = call_cli(["lesson", "build", "--out", tmp_path / "out", "--only", "no-such-lesson"])
    _refused(called, "no-such-lesson", "01_deepspeed_buffer_bug")
    # named as argparse names the command in its own refusals (it once said "explorer lesson:")
    assert called.stderr.startswith("explorer lesson build: error: "), called.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["lesson", "build"], ["--out"]),
        (["lesson"], ["ACTION"]),
        (["lesson", "build", "--out", "x", "--jobs", "0"], ["positive"]),
        (["lesson", "teach", "--out", "x"], ["teach"]),
        (["lesson", "build", "--out", "x", "--only", ""], ["names no lesson", "leave --only out"]),
        (["lesson", "build", "--out", "x", "--only", ",, ,"], ["names no lesson"]),
    ],
    ids=["no-out", "no-action", "zero-jobs", "unknown-action", "only-empty", "only-commas"],
)
def test_bad_usage_is_one_line(argv, words):
    _refused(call_cli(argv), *words)


@pytest.mark.parametrize(
    "text, words",
    [
        ("# no front matter\n", ["lesson.md:1", "'---'"]),
        ("---\nsummary: x\n---\n", ["title"]),
        ("---\ntitle: T\nauthor: me\n---\n", ["lesson.md:3", "author"]),
        ("---\ntitle: T\n---\n```question\nask: first-hazard\n", ["lesson.md:4", "closing"]),
        ("---\ntitle: T\n---\n```explore\nnot a field\n```\n", ["lesson.md:4", "key: value"]),
    ],
    ids=["no-front-matter", "no-title", "unknown-key", "unclosed-block", "bad-field"],
)
def test_a_bad_source_names_the_line(text, words):
    with pytest.raises(LessonError) as caught:
        parse_lesson(text, "lesson")
    for w in words:
        assert w in str(caught.value)


def test_a_bad_directive_is_refused_with_its_place(tmp_path):
    """A directive whose set-up or question cannot be built: the teacher is told where and what."""
    from explorer.lessons.build import lesson_data

    bad = [
        ("```explore\nsetup: deepspeed-train colour=red\n```\n", "colour=red"),
        ("```explore\nsetup: 1f1b\nshow: grid heatmap\n```\n", "heatmap"),
        ("```question\nask: guess\n\nWhat?\n```\n", "guess"),
        (
            "```question\nask: first-hazard\nsetup: 1f1b\nsize: 4x8\n\nClick.\n```\n",
            "no hazard to click",
        ),
        (
            "```question\nask: smallest-failing\nsetup: deepspeed-train buffers=fixed order=legacy\n"
            "stages: 2-4\nmicrobatches: 1-4\noption: 2x2\n\nWhich?\n```\n",
            "none of the options is right",
        ),
        # set-ups `explorer check` refuses: each was stored as error states at every size, and
        # a clean question counted a set-up with no checkable size as clean
        ("```explore\nsetup: 2f2b model=blocking\n```\n", "unknown schedule kind '2f2b'"),
        ("```explore\nsetup: deepspeed-train order=legacyy\n```\n", "order=legacyy"),
        ("```explore\nsetup: 1f1b model=eager\n```\n", "model=eager"),
        ("```explore\nsetup: 1f1b buffers=plenty\n```\n", "buffers=plenty"),
        ("```explore\nsetup: 1f1b rules=nope\n```\n", "unknown rule 'nope'"),
        ("```explore\nsetup: 1f1b\nstages: 10000\nstart: 10000x16\n```\n", "any size"),
        (
            "```question\nask: clean\nstages: 10000\nmicrobatches: 8\n"
            "option: A = deepspeed-train order=fixed\noption: B = 1f1b model=blocking\n\n"
            "Which?\n```\n",
            "cannot be checked at any size",
        ),
        ("```explore\nsetup: 1f1b\nstages: 2-999999999999\n```\n", "1 to 64"),
    ]
    for body, word in bad:
        source = parse_lesson("---\ntitle: T\n---\nProse.\n" + body, "t", "t.md")
        with pytest.raises(LessonError) as caught:
            lesson_data(source, figures=False)
        assert "t.md:5" in str(caught.value) and word in str(caught.value), str(caught.value)


def test_a_lesson_that_is_not_utf8_is_one_line(tmp_path):
    from explorer.lessons.source import read_lesson

    path = tmp_path / "a.md"
    path.write_bytes(b"---\ntitle: T\xff\xfe\n---\nProse.\n")
    with pytest.raises(LessonError) as caught:
        read_lesson(path)
    assert "a.md: not UTF-8 at byte 12" in str(caught.value)


_LESSON = "---\ntitle: {title}\nsummary: s\n---\n\nProse.\n"


def test_a_page_whose_source_changed_or_went_is_removed_not_listed(tmp_path):
    """Build a and b; change a's source, then build b alone: the index linked a's new title to
    the page of its old source. Delete b's source and build: its page stayed."""
    from explorer.lessons.build import build_lessons

    content, out = tmp_path / "content", tmp_path / "out"
    content.mkdir()
    for slug in ("a", "b"):
        (content / f"{slug}.md").write_text(_LESSON.format(title=slug.upper()))
    first = build_lessons(out, folder=content, jobs=1)
    assert [b.slug for b in first.built] == ["a", "b"] and first.removed == []
    (content / "a.md").write_text(_LESSON.format(title="A rewritten"))
    again = build_lessons(out, only=["b"], folder=content, jobs=1)
    assert again.removed == ["a"] and not (out / "a.html").exists()
    index = (out / "index.html").read_text()
    assert "A rewritten" not in index and "a.html" not in index and "b.html" in index
    kept = build_lessons(out, only=["b"], folder=content, jobs=1)  # b unchanged: kept, listed
    assert kept.removed == [] and (out / "b.html").exists()
    (content / "b.md").unlink()
    (content / "c.md").write_text(_LESSON.format(title="C"))
    last = build_lessons(out, folder=content, jobs=1)
    assert last.removed == ["b"] and sorted(p.name for p in out.glob("*.html")) == [
        "a.html",
        "c.html",
        "index.html",
    ]


def test_a_bubble_of_zero_is_under_any_bound():
    """One stage has no bubble at all (0.0, as `explorer check` says): the question read 0.0 as
    "no answer" and took it for 100%, so the 1-stage option was never the right one."""
    from explorer.lessons.build import lesson_data

    body = (
        "```question\nask: bubble-under\nsetup: 1f1b\nunder: 0.1\n"
        "option: 1x4\noption: 4x8\n\nWhich size first has a bubble under 10%?\n```\n"
    )
    source = parse_lesson("---\ntitle: T\n---\nProse.\n" + body, "t", "t.md")
    data = lesson_data(source, figures=False)
    options = next(b for b in data["blocks"] if b.get("mode") == "choice")["options"]
    assert [o["size"] for o in options if o["right"]] == [[1, 4]], options
