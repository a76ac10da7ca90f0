"""Build lessons: each source's directives computed by the analyses, then written as one page.

:func:`lesson_data` turns a parsed source into the page's data: prose as HTML, and for each
directive what :mod:`.explore`, :mod:`.questions`, :mod:`.recorded` and the fix search computed.
With ``figures=False`` it stops at the verdicts (no plotly, a fraction of the time): what the
tests compare with ``explorer check``. :func:`build_lessons` writes every lesson page and the
index into a folder, one process per lesson while cores allow.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from explorer.errors import InputError
from explorer.inputs import check_output_dir
from explorer.lessons.explore import explore_block
from explorer.lessons.markdown import to_html
from explorer.lessons.questions import question_block
from explorer.lessons.recorded import recorded_block
from explorer.lessons.setups import parse_range, parse_setup, schedule_of
from explorer.lessons.source import Directive, LessonSource, read_lesson
from explorer.lessons.store import FigureStore

#: Where the lessons of this repository are kept (one ``.md`` each).
CONTENT = Path(__file__).resolve().parent / "content"
#: A file in the output folder that says the folder holds lessons (so a rebuild may replace them).
MARKER = ".explorer-lessons"


@dataclass(frozen=True)
class BuiltLesson:
    """One written lesson: where, how big, how long it took."""

    slug: str
    title: str
    summary: str
    path: Path
    bytes: int
    seconds: float
    cpu_seconds: float


def lesson_sources(folder: Path = CONTENT) -> list[Path]:
    """The lesson files of ``folder``, in name order (``01_...md`` first)."""
    return sorted(folder.glob("*.md"))


def lesson_data(source: LessonSource, figures: bool = True) -> dict[str, Any]:
    """The page's data for one lesson (see the module docstring)."""
    store = FigureStore() if figures else None
    blocks: list[dict[str, Any]] = []
    questions = 0
    for block in source.blocks:
        if isinstance(block, str):
            if block.strip():
                blocks.append({"type": "prose", "html": to_html(block)})
            continue
        if block.name == "question":
            questions += 1
            blocks.append(question_block(block, store, questions))
        elif block.name == "explore":
            blocks.append(explore_block(block, store))
        elif block.name == "recorded":
            blocks.append(recorded_block(block, store))
        else:
            blocks.append(fixes_block(block))
    return {
        "slug": source.slug,
        "title": source.title,
        "summary": source.summary,
        "notebook": source.notebook,
        "blocks": blocks,
        "figures": store.to_dict() if store is not None else {"pieces": [], "figures": []},
    }


def fixes_block(d: Directive) -> dict[str, Any]:
    """The fix search (``explorer fix``) over a range: its candidates with listings, and what it rejected."""
    from explorer.pipeline import search_fixes

    setup = parse_setup(d.need("setup"), d.where)
    stages = parse_range(d.get("stages", "2-8") or "", d.where, "stages")
    mbs = parse_range(d.get("microbatches", "1-16") or "", d.where, "microbatches")
    found = search_fixes(lambda p, m: schedule_of(setup, p, m), stages, mbs)
    return {"type": "fixes", "setup": setup.spec, "text": found.describe()}


#: Which source text each page in an output folder was built from (slug -> sha256), so a page an
#: earlier build left is listed only while its source is unchanged.
SOURCES_FILE = "sources.json"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _recorded(out: Path) -> dict[str, str]:
    try:
        got = json.loads((out / SOURCES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def check_out_folder(out: Path) -> None:
    """``out`` must be a folder that can be made, and missing, empty or an earlier lesson build."""
    check_output_dir(str(out), "--out")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).exists():
        raise InputError(
            f"--out {out} already holds other files: give an empty or new folder "
            "(or one an earlier 'explorer lesson build' wrote)"
        )


@dataclass(frozen=True)
class BuildResult:
    """The pages written, and the slugs of earlier pages removed as stale (their source changed
    since they were built, or is gone)."""

    built: list[BuiltLesson]
    removed: list[str]


def build_lessons(
    out: Path,
    only: Optional[Sequence[str]] = None,
    folder: Path = CONTENT,
    jobs: Optional[int] = None,
) -> BuildResult:
    """Write every lesson of ``folder`` (or those whose slug is in ``only``) and ``index.html``
    into ``out``; a page an earlier build left is kept only while its source is unchanged."""
    from explorer.lessons.page import index_page

    check_out_folder(out)
    paths = lesson_sources(folder)
    if not paths:
        raise InputError(f"no lesson sources (*.md) in {folder}")
    slugs = [p.stem for p in paths]
    unknown = [s for s in only or () if s not in slugs]
    if unknown:
        raise InputError(f"no lesson named {unknown[0]!r}: choose among {', '.join(slugs)}")
    chosen = [p for p in paths if not only or p.stem in only]
    sources = [read_lesson(p) for p in chosen]  # every source parsed before any work starts
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("lessons written by explorer lesson build\n", encoding="utf-8")
    workers = max(1, min(jobs or os.cpu_count() or 1, len(sources)))
    if workers == 1:
        built = [write_lesson(s, out) for s in sources]
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            built = list(pool.map(write_lesson, sources, [out] * len(sources)))
    recorded = {**_recorded(out), **{p.stem: _digest(p) for p in chosen}}
    stale = _drop_stale(paths, recorded, out)
    (out / SOURCES_FILE).write_text(json.dumps(recorded, indent=1), encoding="utf-8")
    (out / "index.html").write_text(index_page(_listed(paths, built, out)), encoding="utf-8")
    return BuildResult(built, stale)


def _drop_stale(paths: Sequence[Path], recorded: dict[str, str], out: Path) -> list[str]:
    """Remove the pages an earlier build left whose source changed since, or is gone: the index
    listed them under the new title while they taught the old lesson. Their slugs are returned."""
    sources = {p.stem: p for p in paths}
    stale = []
    for page in sorted(out.glob("*.html")):
        slug = page.stem
        if slug == "index":
            continue
        source = sources.get(slug)
        if source is None or recorded.get(slug) != _digest(source):
            page.unlink()
            recorded.pop(slug, None)
            stale.append(slug)
    return stale


def _listed(paths: Sequence[Path], built: Sequence[BuiltLesson], out: Path) -> list[BuiltLesson]:
    """Every lesson whose page is in ``out``: those just built, and those an earlier build left
    from the same source."""
    fresh = {b.slug: b for b in built}
    listed = []
    for path in paths:
        page = out / f"{path.stem}.html"
        if path.stem in fresh:
            listed.append(fresh[path.stem])
        elif page.is_file():
            source = read_lesson(path)
            listed.append(
                BuiltLesson(
                    source.slug, source.title, source.summary, page, page.stat().st_size, 0.0, 0.0
                )
            )
    return listed


def write_lesson(source: LessonSource, out: Path) -> BuiltLesson:
    """Compute one lesson and write its page; returns what was written."""
    from explorer.lessons.page import lesson_page

    start, cpu = time.perf_counter(), time.process_time()
    text = lesson_page(lesson_data(source))
    path = out / f"{source.slug}.html"
    path.write_text(text, encoding="utf-8")
    return BuiltLesson(
        slug=source.slug,
        title=source.title,
        summary=source.summary,
        path=path,
        bytes=path.stat().st_size,
        seconds=time.perf_counter() - start,
        cpu_seconds=time.process_time() - cpu,
    )


__all__ = [
    "CONTENT",
    "MARKER",
    "SOURCES_FILE",
    "BuildResult",
    "BuiltLesson",
    "build_lessons",
    "check_out_folder",
    "fixes_block",
    "lesson_data",
    "lesson_sources",
    "write_lesson",
]
