"""Every lesson in Debian's Chromium, opened from ``file://`` with every other request refused.

``explorer lesson build`` writes the lessons into a temporary folder (once per test run, shared
with ``tests/lessons/test_lesson_build.py``); each is opened from its
file with ``page.route`` refusing any request that is not the file itself (a lesson must need
nothing: no CDN, no font, no server). Then, judged by what the page shows:

* the page says it is ready, with no browser error and no request refused;
* each explore block follows its controls: every set-up, a stage count and a micro-batch count
  (the status line says what the stored state says: clean, its number of findings, or the
  generator's refusal), a finding clicked is outlined on the grid, and a size clicked on the
  sizes map is loaded;
* every question is answered wrong, then right: choice buttons and grid cells (clicked at the
  pixel plotly draws them at), each with the verdict, the stored note and the explanation.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from plotly_point import click_point

from explorer.lessons.build import lesson_sources

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SLUGS = [p.stem for p in lesson_sources()]


@pytest.fixture(scope="module")
def built(built_lessons) -> Path:
    """Every lesson, as ``explorer lesson build`` wrote them (shared with the build's tests)."""
    assert built_lessons.done.returncode == 0, built_lessons.done.stderr
    return built_lessons.folder


@pytest.fixture(scope="module")
def stored(lesson_verdicts) -> dict[str, dict]:
    """What each lesson stored (verdicts only): the answers the page must show."""
    return lesson_verdicts


class Opened:
    """One lesson page, with what it requested and what the browser reported."""

    def __init__(self, chromium, path: Path) -> None:
        self.page = chromium.new_page(width=1400, height=900)
        self.refused: list[str] = []
        self.errors: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        own = path.as_uri()

        def route(r) -> None:
            if r.request.url == own:
                r.continue_()
            else:
                self.refused.append(r.request.url)
                r.abort()

        self.page.route("**/*", route)
        self.page.goto(own)
        self.page.wait_for_selector("body[data-ready]", timeout=60_000)
        assert self.page.evaluate("document.body.dataset.ready") == "1", self.page.inner_text(
            "#loading"
        )

    def section(self, i: int):
        """Block ``i``, scrolled into view and drawn."""
        sel = f"section.block[data-block='{i}']"
        self.page.locator(sel).scroll_into_view_if_needed()
        self.page.wait_for_selector(f"{sel}[data-ready='1']", timeout=30_000)
        return self.page.locator(sel)

    def click_cell(self, figure, x: float, y: float) -> None:
        """Click the plotly figure ``figure`` at data coordinates (x, y), where plotly drew them."""
        click_point(self.page, figure, x, y)


def _set(section, name: str, index: int) -> None:
    section.locator(f"input.{name}").evaluate(
        "(el, i) => { el.value = String(i); el.dispatchEvent(new Event('input')); }", index
    )


def _expect_status(opened: Opened, section, key: str, state: dict) -> None:
    opened.page.wait_for_function(
        "([el, key]) => el.dataset.drawn === key", arg=[section.element_handle(), key]
    )
    status = section.locator("p.status").inner_text()
    if "error" in state:
        assert "not a valid size" in status and state["error"][:40] in status
    elif state["ok"]:
        assert "clean, no findings" in status
    else:
        n = len(state["findings"]) + state["more"]
        assert f"{n} finding" in status, status
    shown = section.locator("ol.findings li:not(.more)").count()
    assert shown == len(state.get("findings", []))


def _walk_explore(opened: Opened, i: int, block: dict) -> None:
    section = opened.section(i)
    stages, mbs = block["stages"], block["microbatches"]
    for s in range(len(block["setups"])):
        section.locator("select.setup").select_option(str(s))
        for p, m in ((stages[0], mbs[0]), (stages[-1], mbs[-1]), (stages[len(stages) // 2], 3)):
            _set(section, "stages", stages.index(p))
            _set(section, "micro-batches", mbs.index(m))
            key = f"{s}/{p}/{m}"
            _expect_status(opened, section, key, block["states"][key])
    # a broken state (where the block has one): click its first finding, see it outlined
    broken = next(
        (k for k, v in block["states"].items() if "error" not in v and v["findings"]), None
    )
    if broken is not None:
        _locate_first_finding(opened, section, block, broken)
    s = int((section.get_attribute("data-state") or "0").split("/")[0])
    if "sizes" in block["show"]:
        sizes = section.locator(".figure.sizes")
        opened.click_cell(sizes, mbs[1], stages[1])
        _expect_status(
            opened,
            section,
            f"{s}/{stages[1]}/{mbs[1]}",
            block["states"][f"{s}/{stages[1]}/{mbs[1]}"],
        )


def _locate_first_finding(opened: Opened, section, block: dict, key: str) -> None:
    stages, mbs = block["stages"], block["microbatches"]
    s, p, m = (int(x) for x in key.split("/"))
    section.locator("select.setup").select_option(str(s))
    _set(section, "stages", stages.index(p))
    _set(section, "micro-batches", mbs.index(m))
    _expect_status(opened, section, key, block["states"][key])
    first = block["states"][key]["findings"][0]
    section.locator("ol.findings li").first.click()
    assert section.locator("ol.findings li.selected").inner_text() == first[0]
    if "grid" in block["show"] and first[1] >= 0:
        grid = section.locator(".figure.grid")
        assert grid.get_attribute("data-located") == f"{first[1]}/{first[2]}"
        shapes = grid.evaluate("gd => (gd.layout.shapes || []).filter(s => s.name === 'located')")
        assert shapes and shapes[0]["x0"] == first[2] - 0.5 and shapes[0]["y0"] == first[1] - 0.5


def _feedback(section) -> tuple[str, str]:
    box = section.locator(".feedback")
    return box.locator(".verdict").inner_text(), box.inner_text()


def _answer_choice(opened: Opened, i: int, q: dict) -> None:
    section = opened.section(i)
    wrong = [k for k, o in enumerate(q["options"]) if not o["right"]]
    right = [k for k, o in enumerate(q["options"]) if o["right"]]
    assert wrong and right, q["id"]
    assert section.locator(".feedback").inner_text().strip() == ""  # nothing told before an answer
    section.locator(f"button.option[data-option='{wrong[0]}']").click()
    verdict, text = _feedback(section)
    assert "Not quite" in verdict and q["options"][wrong[0]]["note"] in text
    assert "The analyses say: " in text
    assert section.get_attribute("data-answered") == "wrong"
    section.locator(f"button.option[data-option='{right[0]}']").click()
    verdict, text = _feedback(section)
    assert "Right" in verdict and q["options"][right[0]]["note"] in text
    assert section.get_attribute("data-answered") == "right"
    explain = section.locator(".feedback .explain").inner_text().strip()
    assert explain and explain.split()[0] in text


def _answer_cell(opened: Opened, i: int, q: dict) -> None:
    section = opened.section(i)
    grid = section.locator(".figure.grid")
    stage, step = q["answer"][0]
    # stage 0 works from step 0 on (an empty cell is a gap plotly sends no click for)
    miss = (0, 0) if [0, 0] not in q["answer"] else (0, 1)
    opened.click_cell(grid, miss[1], miss[0])
    opened.page.wait_for_function("el => el.dataset.answered", arg=section.element_handle())
    verdict, text = _feedback(section)
    assert "Not quite" in verdict and f"stage {miss[0]}, step {miss[1]}" in text
    assert section.get_attribute("data-clicked") == f"{miss[0]}/{miss[1]}"
    opened.click_cell(grid, step, stage)
    opened.page.wait_for_function(
        "el => el.dataset.answered === 'right'", arg=section.element_handle()
    )
    verdict, text = _feedback(section)
    assert "Right" in verdict and q["right_note"] in text
    assert section.locator(".feedback .explain").inner_text().strip()


@pytest.mark.parametrize("slug", SLUGS)
def test_a_lesson_works_offline_from_its_file(chromium, built, stored, slug):
    opened = Opened(chromium, built / f"{slug}.html")
    try:
        data = stored[slug]
        assert opened.page.title() == data["title"]
        for i, block in enumerate(data["blocks"]):
            if block["type"] == "explore":
                _walk_explore(opened, i, block)
            elif block["type"] == "question" and block["mode"] == "choice":
                _answer_choice(opened, i, block)
            elif block["type"] == "question":
                _answer_cell(opened, i, block)
            elif block["type"] in ("recorded", "fixes"):
                section = opened.section(i)
                assert section.locator(".figure, pre").count() >= 1
        assert opened.refused == []
        assert opened.errors == []
    finally:
        opened.page.close()


def test_the_index_links_every_lesson(chromium, built):
    page = chromium.new_page()
    try:
        page.goto((built / "index.html").as_uri())
        links = page.locator("ol.lessons a").evaluate_all(
            "els => els.map(e => e.getAttribute('href'))"
        )
        assert links == [f"{s}.html" for s in SLUGS]
        assert all((built / link).is_file() for link in links)
    finally:
        page.close()
