"""``explorer lesson build`` for real: files under 5 MB, an index, the page's data equal to the
verdicts the tests check, figures that are plotly figures, and the same bytes on a rebuild."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from cli_in_process import run_cli_child
from plotly.offline import get_plotlyjs

from explorer.lessons.build import MARKER
from explorer.lessons.store import rebuild
from explorer.ui.plotly_bundle import SMALL_BUNDLE, bundle_version

LATER = "04_compile_recompiles"  # the cheapest lesson to build again (a recorded run)
CONTENT = Path(__file__).resolve().parents[2] / "explorer" / "lessons" / "content"


def _blob(page: str, element: str) -> str:
    found = re.search(
        rf"<script type='application/gzip\+base64' id='{element}'>([^<]*)</script>", page
    )
    assert found, element
    return gzip.decompress(base64.b64decode(found.group(1))).decode("utf-8")


def _without_figures(block: dict) -> dict:
    if block["type"] == "explore":
        states = {
            k: {f: v for f, v in s.items() if f != "figs"} for k, s in block["states"].items()
        }
        return {**block, "states": states, "sizes": []}
    if block["type"] == "question" and block["mode"] == "cell":
        return {**block, "figure": -1}
    if block["type"] == "recorded":
        return {**block, "figures": []}
    return block


@pytest.mark.slow  # every lesson built by the command in a child (shared with the browser tier)
def test_build_writes_small_offline_pages_holding_the_checked_verdicts(
    built_lessons, lesson_verdicts, tmp_path
):
    done, out = built_lessons
    assert done.returncode == 0, done.stderr
    pages = sorted(out.glob("*.html"))
    slugs = sorted(p.stem for p in CONTENT.glob("*.md"))
    assert [p.name for p in pages] == [f"{slug}.html" for slug in slugs] + ["index.html"]
    assert (out / MARKER).exists()
    for page in pages[:-1]:
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size < 5_000_000
        assert "https://" not in text.split("<script type=")[0]  # the prose links nothing it loads
        js = _blob(text, "plotly-js")
        assert bundle_version(js) == bundle_version(get_plotlyjs())  # the figures' plotly.js
        assert js == SMALL_BUNDLE.read_text(encoding="utf-8")  # bar, heatmap, scatter, table
        data = json.loads(_blob(text, "lesson-data"))
        plain = lesson_verdicts[page.stem]
        assert [_without_figures(b) for b in data["blocks"]] == plain["blocks"]
        store = data["figures"]
        drawn = [rebuild(store, i) for i in range(len(store["figures"]))]
        assert drawn and all("layout" in fig for fig in drawn)
        # a figure with no traces says why (a deadlocked schedule's timeline: 03's blocking P2P)
        assert all(fig["data"] or "none:" in fig["layout"]["title"]["text"] for fig in drawn)
        assert any(fig["data"] for fig in drawn)
    first = (out / "01_deepspeed_buffer_bug.html").read_text(encoding="utf-8")
    data = json.loads(_blob(first, "lesson-data"))
    explore = next(b for b in data["blocks"] if b["type"] == "explore")
    grid = rebuild(data["figures"], explore["states"]["0/4/8"]["figs"]["grid"])
    assert "4 stages × 8 micro-batches" in grid["layout"]["title"]["text"]
    assert "finding" in grid["layout"]["title"]["text"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert all(f"{slug}.html" in index for slug in slugs)

    # --only builds what it names, and the same bytes in another process
    page = f"{LATER}.html"
    alone = tmp_path / "alone"
    again = run_cli_child(["lesson", "build", "--out", alone, "--only", LATER])
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in alone.glob("*.html")) == [page, "index.html"]
    assert (alone / page).read_bytes() == (out / page).read_bytes()  # a deterministic build
    # over a folder built before, the pages it did not name stay, and stay listed
    kept = Path(shutil.copytree(out, tmp_path / "kept"))
    again = run_cli_child(["lesson", "build", "--out", kept, "--only", LATER])
    assert again.returncode == 0, again.stderr
    assert (kept / page).read_bytes() == (out / page).read_bytes()
    assert (kept / "01_deepspeed_buffer_bug.html").read_bytes() == (
        out / "01_deepspeed_buffer_bug.html"
    ).read_bytes()
    index = (kept / "index.html").read_text(encoding="utf-8")
    assert "01_deepspeed_buffer_bug.html" in index  # the lesson built earlier stays listed
