"""Lessons: size of each file, build time of all of them, open time in Chromium from ``file://``.

    python benchmarks/bench_lessons.py [--opens 5] [--out DIR]

1. Build: ``explorer lesson build --out DIR`` as a child process (what a teacher runs), wall
   time and the CPU time each lesson took (the command prints both). Goal: under a minute.
2. Size of each lesson file. Goal: under 5 MB each.
3. Open: Debian's Chromium (Playwright, headless), every request that is not the file itself
   refused; each lesson opened ``--opens`` times in a fresh page, from ``goto`` to the page
   saying it is ready (the blocks in view drawn, every control wired). The page's own marks
   say where the time went: script start, plotly.js unzipped, plotly.js run, data parsed,
   drawn (milliseconds since navigation). Beside it, in the same run, a page holding only
   plotly.js and one bar chart (``plotly.io.write_html``, plotly.js inlined): the floor any
   offline plotly page pays here. Goal: a lesson open in under 2 s.

Load averages are printed before and after each part: the machine is shared. Exit 1 when a
goal was missed (``make bench`` says which script did).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build(out: Path) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "explorer", "lesson", "build", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    seconds = time.perf_counter() - start
    print(done.stdout.rstrip())
    return seconds


def open_times(path: Path, opens: int, chromium) -> tuple[list[float], dict]:
    """Seconds from ``goto`` to ready, per open; the page's own marks of the last open."""
    times, marks = [], {}
    for _ in range(opens):
        page = chromium.new_page(width=1400, height=900)
        refused: list[str] = []
        own = path.as_uri()
        page.route(
            "**/*",
            lambda r: (
                r.continue_()
                if r.request.url == own
                else (refused.append(r.request.url), r.abort())
            ),
        )
        start = time.perf_counter()
        page.goto(own)
        page.wait_for_selector("body[data-ready]", timeout=60_000)
        times.append(time.perf_counter() - start)
        marks = page.evaluate("window.lessonTimings || {}")
        assert page.evaluate("document.body.dataset.ready") == "1" and not refused, refused
        page.close()
    return times, marks


def plain_plotly(folder: Path, opens: int, chromium) -> list[float]:
    import plotly.graph_objects as go

    path = folder / "plain-plotly.html"
    go.Figure(go.Bar(y=[1, 3, 2])).write_html(str(path), include_plotlyjs=True)
    times = []
    for _ in range(opens):
        page = chromium.new_page(width=1400, height=900)
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector(".main-svg")
        times.append(time.perf_counter() - start)
        page.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="explorer-lessons-bench-"))
    print(f"# {platform.machine()} {os.cpu_count()} cores, python {platform.python_version()}")
    print(f"# build: load average before {load()}")
    seconds = build(out)
    print(f"# build: {seconds:.1f} s wall for all lessons (goal < 60 s); load after {load()}")
    missed = [f"build {seconds:.1f} s"] if seconds >= 60 else []
    lessons = sorted(out.glob("[0-9]*.html"))
    for path in lessons:
        mb = path.stat().st_size / 1e6
        print(f"size {path.name:40s} {mb:5.2f} MB {'ok' if mb < 5 else 'OVER 5 MB'}")
        missed += [f"{path.name} {mb:.2f} MB"] if mb >= 5 else []
    import lab_harness

    with lab_harness.Browser() as chromium:
        print(f"# open: load average before {load()}")
        floor = plain_plotly(out.parent if args.out is None else out, args.opens, chromium)
        print(
            f"open {'plotly.js + one bar chart (floor)':40s} median {statistics.median(floor):.2f} s"
            f"  min {min(floor):.2f}  max {max(floor):.2f}"
        )
        for path in lessons:
            times, marks = open_times(path, args.opens, chromium)
            if statistics.median(times) >= 2:
                missed.append(f"open {path.name} {statistics.median(times):.2f} s")
            steps = " ".join(f"{k} {v:.0f}" for k, v in marks.items())
            print(
                f"open {path.name:40s} median {statistics.median(times):.2f} s  min {min(times):.2f}"
                f"  max {max(times):.2f}  (ms: {steps})"
            )
        print(f"# open: load average after {load()}")
    print("# goals missed: " + ("; ".join(missed) if missed else "none"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
