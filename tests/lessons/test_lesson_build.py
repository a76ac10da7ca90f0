"""``explorer lesson build`` for real: files under 5 MB, an index, the page's data equal to the
verdicts the tests check, figures that are plotly figures, and the same bytes on a rebuild."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path

import pytest
from cli_in_process import run_cli_child
from plotly.offline import get_plotlyjs

from explorer.lessons.build import MARKER, lesson_data
from explorer.lessons.source import read_lesson
from explorer.lessons.store import rebuild
from explorer.ui.plotly_bundle import SMALL_BUNDLE, bundle_version

ONLY = "01_deepspeed_buffer_bug,04_compile_recompiles"
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


@pytest.mark.slow  # the command in a child, seconds of figures
def test_build_writes_small_offline_pages_holding_the_checked_verdicts(tmp_path):
    out = tmp_path / "lessons"
    done = run_cli_child(["lesson", "build", "--out", out, "--only", ONLY], timeout=600)
    assert done.returncode == 0, done.stderr
    pages = sorted(out.glob("*.html"))
    assert [p.name for p in pages] == [
        "01_deepspeed_buffer_bug.html",
        "04_compile_recompiles.html",
        "index.html",
    ]
    assert (out / MARKER).exists()
    for page in pages[:-1]:
        text = page.read_text(encoding="utf-8")
        assert page.stat().st_size < 5_000_000
        assert "https://" not in text.split("<script type=")[0]  # the prose links nothing it loads
        js = _blob(text, "plotly-js")
        assert bundle_version(js) == bundle_version(get_plotlyjs())  # the figures' plotly.js
        assert js == SMALL_BUNDLE.read_text(encoding="utf-8")  # bar, heatmap, scatter, table
        data = json.loads(_blob(text, "lesson-data"))
        plain = lesson_data(read_lesson(CONTENT / f"{page.stem}.md"), figures=False)
        assert [_without_figures(b) for b in data["blocks"]] == plain["blocks"]
        store = data["figures"]
        drawn = [rebuild(store, i) for i in range(len(store["figures"]))]
        assert drawn and all(fig["data"] and "layout" in fig for fig in drawn)
    first = (out / "01_deepspeed_buffer_bug.html").read_text(encoding="utf-8")
    data = json.loads(_blob(first, "lesson-data"))
    explore = next(b for b in data["blocks"] if b["type"] == "explore")
    grid = rebuild(data["figures"], explore["states"]["0/4/8"]["figs"]["grid"])
    assert "4 stages × 8 micro-batches" in grid["layout"]["title"]["text"]
    assert "finding" in grid["layout"]["title"]["text"]
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "01_deepspeed_buffer_bug.html" in index and "04_compile_recompiles.html" in index

    before = pages[1].read_bytes()
    again = run_cli_child(["lesson", "build", "--out", out, "--only", "04_compile_recompiles"])
    assert again.returncode == 0, again.stderr
    assert pages[1].read_bytes() == before  # a deterministic build
    index = (out / "index.html").read_text(encoding="utf-8")
    assert "01_deepspeed_buffer_bug.html" in index  # the lesson built earlier stays listed
