"""``explorer lesson build --out DIR``: write the lessons, one offline HTML file each, and an index.

Exit 0 when every lesson was written, 2 on bad input (a ``--out`` that is a file or holds
other files, an unknown ``--only`` lesson, a lesson source a teacher must fix), with one line
on stderr that says what to change.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from explorer import cli_options


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "lesson",
        help="build self-contained lessons (one offline HTML file each) for teaching",
        description=__doc__.splitlines()[0],
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = actions.add_parser("build", help="write every lesson and index.html into --out")
    b.add_argument(
        "--out",
        required=True,
        type=cli_options.output_dir("--out"),
        metavar="DIR",
        help="folder to write into (created when missing; in an earlier lesson build's folder, pages "
        "are replaced, and a page whose source changed or is gone is removed)",
    )
    b.add_argument(
        "--only",
        type=_slugs,
        default=None,
        metavar="SLUG,...",
        help="build only these lessons (file names without .md, comma-separated)",
    )
    b.add_argument(
        "--jobs",
        type=cli_options.count("--jobs", hi=64, label="processes", why="more is a typo"),
        default=None,
        metavar="N",
        help="lessons built at once (default: one per core)",
    )
    b.set_defaults(func=run)


def _slugs(text: str) -> list[str]:
    """``--only``'s lesson names; a value that names none (``''``, ``,,``) is a mistake, not
    "every lesson" (leaving ``--only`` out says that)."""
    slugs = [s.strip() for s in text.split(",") if s.strip()]
    if not slugs:
        raise argparse.ArgumentTypeError(
            f"{text!r} names no lesson: give lesson names separated by commas"
            " (file names without .md), or leave --only out to build every lesson"
        )
    return slugs


def run(args: argparse.Namespace) -> int:
    from explorer.lessons.build import build_lessons

    start = time.perf_counter()
    out = Path(args.out)
    result = build_lessons(out, only=args.only, jobs=args.jobs)
    built = result.built
    for slug in result.removed:
        print(
            f"removed {out / (slug + '.html')}: its source changed since it was built, or is gone"
        )
    for lesson in built:
        print(
            f"{lesson.path}  {lesson.bytes / 1e6:.2f} MB  {lesson.seconds:.1f} s "
            f"({lesson.cpu_seconds:.1f} s CPU)  {lesson.title}"
        )
    print(f"{out / 'index.html'}  ({len(built)} lessons, {time.perf_counter() - start:.1f} s)")
    return 0


__all__ = ["register", "run"]
