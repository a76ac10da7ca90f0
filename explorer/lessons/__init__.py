"""Lessons: self-contained, kernel-free pages that teach with the explorer's own analyses.

``explorer lesson build --out DIR`` turns each lesson source (``content/*.md``: markdown with
directives, :mod:`.source`) into one HTML file that opens offline in any browser, plus an
index page. Everything a page shows or checks was computed at build time by the products'
public faces (``explorer.pipeline``'s ``build``/``check`` and views, ``explorer.compile``'s
reader and views); the page script only picks among stored states and compares answers with
stored verdicts. This package sits with the door: like ``explorer read``, it lists more than
one product.

    from explorer.lessons import build_lessons
    build_lessons(Path("lessons-out"))
"""

from explorer.lazy import exports

_TABLE = {
    "build_lessons": "explorer.lessons.build",
    "lesson_data": "explorer.lessons.build",
    "lesson_sources": "explorer.lessons.build",
    "read_lesson": "explorer.lessons.source",
    "parse_lesson": "explorer.lessons.source",
}
__getattr__, __dir__ = exports(__name__, _TABLE)
__all__ = sorted(_TABLE)
