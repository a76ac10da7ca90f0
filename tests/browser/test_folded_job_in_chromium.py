"""A job of 8,192 ranks, folded, in Debian's Chromium: the page ``explorer read --html`` writes.

A real run of the explorer's engine (1F1B, 2 stages, 2 micro-batches, 2 iterations on gloo) is
replicated into 4,096 replicas with two planted stragglers (``tests/replicated_job.py``), read
and folded by the CLI, and the page opened from ``file://`` with every other request refused:
it draws, its outlier marks are exactly the planted ranks, and a click on a mark shows that
rank's own lane. How fast it opens is measured in ``benchmarks/bench_browser.py``, not here.
"""

from __future__ import annotations

import pytest
from plotly_point import click_point
from replicated_job import replicate

from explorer.pipeline.analysis import build
from explorer.pipeline.runtime import RunSpec, run_pipeline
from explorer.pipeline.views.folded import OUTLIERS
from tests.cli_in_process import call_cli

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REPLICAS = 4096  # x 2 pipeline ranks: 8,192 ranks


def test_a_folded_job_of_8192_ranks_draws_and_opens_each_stragglers_lane(chromium, tmp_path):
    recorded = tmp_path / "recorded"
    assert run_pipeline(RunSpec.for_schedule(build("1f1b", 2, 2), iterations=2), recorded).ok
    truth = replicate(recorded, tmp_path / "job", replicas=REPLICAS, from_iteration=0, seed=1)
    page_file = tmp_path / "folded.html"
    out = call_cli(["read", str(tmp_path / "job"), "--html", str(page_file)])
    assert out.returncode == 1 and "8192 ranks = 4096 replicas" in out.stdout, out.stderr
    page = chromium.new_page(width=1400, height=900)
    errors: list[str] = []
    refused: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    own = page_file.as_uri()
    page.route(
        "**/*",
        lambda r: (
            r.continue_() if r.request.url == own else (refused.append(r.request.url), r.abort())
        ),
    )
    page.goto(own)
    page.wait_for_selector(".plotly-graph-div .main-svg", timeout=60_000)
    folded = page.locator(".plotly-graph-div").first
    title = folded.evaluate("gd => gd.layout.title.text")
    assert title == "8,192 ranks folded: 2 stages x 4,096 replicas; 2 outlier ranks"
    xs, ys, ranks = folded.evaluate(
        f"gd => {{ const t = gd.data.find(d => d.name === {OUTLIERS!r}); "
        "return [t.x, t.y, t.customdata]; }"
    )
    assert sorted(ranks) == sorted(s.rank for s in truth.stragglers)
    for x, y, rank in zip(xs, ys, ranks):
        click_point(page, folded, x, y, custom=rank)
        lane = page.locator(f"#lane-{rank}")
        lane.wait_for(state="visible", timeout=10_000)
        assert (
            lane.locator(".plotly-graph-div")
            .evaluate("gd => gd.layout.title.text")
            .startswith(f"rank {rank}: its own lane")
        )
        page.evaluate(f"document.getElementById('lane-{rank}').scrollIntoView()")
        page.evaluate("window.scrollTo(0, 0)")
    assert errors == [] and refused == []
