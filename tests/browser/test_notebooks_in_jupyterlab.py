"""All six notebooks in a real JupyterLab, run by Debian's Chromium, judged by what the page shows.

For each notebook: *Run → Run All Cells* in a fresh JupyterLab (see ``lab_harness.py``), then

* every plotly figure inside an explorer widget is at least 90 % of its output area's width,
  on first display and after the window is resized (1500 → 1200 → 1500 px);
* no plotly table has an empty header or a column without any text on first display;
* after Run All and a few interactions per explorer (a control changed, a finding clicked, Run
  pressed where the explorer has a Run button) no kernel ``error`` or ``stderr`` message reached
  the page (cells *and* widget callbacks, whose errors JupyterLab shows only in its Log Console),
  no cell shows a stderr output, and the browser logged no error;
* in 01, the grid follows the stage slider and the micro-batches box (title and stage ticks);
* in 06, once the job ended and the follower stopped, the live view says so: no "(running)" and
  no rank drawn as running (torchrun kills the rank that never failed itself).

A screenshot per notebook goes to ``$EXPLORER_SHOTS`` (default: a pytest temporary folder); the
paths are printed. Notebooks 03–05 run real torch, torch_xla and torch.compile work: minutes here.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import lab_harness as lh
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = [
    "01_pipeline_schedules.ipynb",
    "02_deepspeed_buffer_bug.ipynb",
    "03_run_pipeline.ipynb",
    "04_xla_recompilation.ipynb",
    "05_compile_recompiles.ipynb",
    "06_deepspeed_engine.ipynb",
]
#: Seconds for Run All (03–05 start real pipelines, XLA and torch.compile work on a 2-core machine).
RUN_ALL_S = {"01": 300, "02": 300, "03": 600, "04": 600, "05": 600, "06": 600}
#: Which cell holds each notebook's explorer (a snippet of its source).
EXPLORER_CELL = {
    "01": "ScheduleExplorer(",
    "02": "ScheduleExplorer(",
    "03": "ScheduleExplorer(",
    "04": "XlaExplorer.open(",
    "05": "CompileExplorer(",
    "06": "JobFollower(",
}
#: Files a notebook reads beside it, copied to the same place relative to the served copy
#: (06 starts ``../tests/data/deepspeed_user_job.py`` with torchrun).
BESIDE = {"06": ["tests/data"]}
WIDE, NARROW, HEIGHT = 1500, 1200, 1000
FIRST_DISPLAY_WAIT_S = 30  # how long the page may take to finish drawing once the kernel is idle


@dataclass
class NotebookRun:
    """One notebook after Run All: the page, what it showed first, and the interactions' outcome."""

    key: str
    nb: lh.NotebookPage
    shots: Path
    first_plots: list = field(default_factory=list)
    first_tables: list = field(default_factory=list)
    unexecuted: list = field(default_factory=list)
    screenshots: list = field(default_factory=list)
    _interacted: Optional[list] = None

    def shot(self, name: str, target=None) -> Path:
        path = self.nb.screenshot(self.shots / f"{self.key}_{name}.png", target)
        self.screenshots.append(path)
        print(f"screenshot: {path}")
        return path

    def explorer(self) -> lh.Explorer:
        return lh.Explorer(self.nb, EXPLORER_CELL[self.key])

    def interactions(self) -> list[str]:
        """Run this notebook's interactions once; returns what did not follow (for the 01 test)."""
        if self._interacted is None:
            self._interacted = []
            if self.explorer().root.count() == 0:
                self._interacted.append(
                    f"no explorer widget in the output of the cell with `{EXPLORER_CELL[self.key]}`"
                )
                return self._interacted
            try:
                INTERACTIONS[self.key](self, self._interacted)
            finally:
                self.shot("after_interactions", self.explorer().root)
        return self._interacted

    def where(self) -> str:
        return f"{self.nb.notebook} (screenshots: {', '.join(map(str, self.screenshots))})"


def _first_display(nb: lh.NotebookPage) -> tuple[list, list]:
    """Plots and tables once the page finished drawing: polls until widget figures exist, every one
    fills its width and every table has text, or until ``FIRST_DISPLAY_WAIT_S`` (then the tests
    report what was drawn by then)."""
    deadline = time.monotonic() + FIRST_DISPLAY_WAIT_S
    last_count = -1
    while True:
        plots, tables = nb.plots(), nb.tables()
        widget_plots = [p for p in plots if p["widget"]]
        settled = (
            len(plots) == last_count
            and widget_plots
            and not lh.narrow_widget_plots(plots)
            and not lh.empty_table_columns(tables)
        )
        if settled or time.monotonic() > deadline:
            return plots, tables
        last_count = len(plots)
        nb.page.wait_for_timeout(500)


@pytest.fixture(scope="module", params=NOTEBOOKS, ids=lambda n: n[:2])
def run(request, lab_kernels, chromium, shots, tmp_path_factory):
    name = request.param
    key = name[:2]
    work = tmp_path_factory.mktemp(f"lab{key}")
    for folder in BESIDE.get(key, []):  # the Lab serves work/root: ".." is work
        shutil.copytree(lh.REPO / folder, work / folder)
    with lh.Lab(work, {name: lh.NOTEBOOKS / name}) as lab:
        page = chromium.new_page(WIDE, HEIGHT)
        try:
            nb = lh.NotebookPage(page, lab, name)
            nb.open()
            nb.run_all(timeout_s=RUN_ALL_S[key])
            r = NotebookRun(key, nb, shots)
            r.unexecuted = nb.unexecuted_cells()
            r.first_plots, r.first_tables = _first_display(nb)
            r.shot("after_run_all", r.explorer().root)
            yield r
        finally:
            page.close()


def test_run_all_executes_every_cell(run):
    assert run.unexecuted == [], (
        f"{run.where()}: cells without an execution count after Run All "
        f"(a cell raised and the rest were aborted?): {run.unexecuted}; "
        f"errors: {[str(p) for p in run.nb.problems() if p.source == 'iopub error']}"
    )


def test_explorer_figures_fill_their_output_width(run):
    widget_plots = [p for p in run.first_plots if p["widget"]]
    assert widget_plots, f"{run.where()}: no plotly figure inside the explorer widget after Run All"
    problems = [
        f"after Run All at {WIDE} px: {lh.describe_plot(p)}"
        for p in lh.narrow_widget_plots(run.first_plots)
    ]
    page = run.nb.page
    for width in (NARROW, WIDE):
        before = {p["areaWidth"] for p in run.nb.plots() if p["widget"]}
        page.set_viewport_size({"width": width, "height": HEIGHT})
        deadline = time.monotonic() + FIRST_DISPLAY_WAIT_S
        while True:  # the output area must change width, then every figure must follow it
            plots = run.nb.plots()
            areas = {p["areaWidth"] for p in plots if p["widget"]}
            if areas and areas != before and not lh.narrow_widget_plots(plots):
                break
            if time.monotonic() > deadline:
                break
            page.wait_for_timeout(250)
        if width == NARROW:
            run.shot(f"at_{width}px", run.explorer().root)
        assert areas != before, (
            f"{run.nb.notebook}: resizing the window to {width} px did not change the output width ({before})"
        )
        problems += [
            f"after resizing the window to {width} px: {lh.describe_plot(p)}"
            for p in lh.narrow_widget_plots(plots)
        ]
    assert not problems, (
        f"{run.where()}: explorer figures narrower than 90% of their output area:\n  "
        + "\n  ".join(problems)
    )


def test_tables_have_no_empty_header_or_column_on_first_display(run):
    empty = lh.empty_table_columns(run.first_tables)
    assert not empty, (
        f"{run.where()}: plotly tables on first display (after Run All):\n  " + "\n  ".join(empty)
    )


def test_no_error_or_stderr_after_run_all_and_interactions(run):
    run.interactions()
    shown = run.nb.stderr_outputs()
    stderr = [f"{o['cell']}: {o['text'].strip()}" for o in shown]
    # a cell's stderr stream is also in that cell's output (listed above); keep the rest once
    problems = [
        str(p)
        for p in run.nb.problems()
        if not (
            p.source == "iopub stderr"
            and p.where.startswith("cell")
            and any(p.text.strip() in o["text"] for o in shown)
        )
    ]
    message = []
    if stderr:
        message.append("stderr outputs shown in cells:\n  " + "\n  ".join(stderr))
    if problems:
        message.append(
            "kernel errors/stderr (iopub; widget callbacks go only to the Log Console) and browser errors:\n  "
            + "\n  ".join(problems)
        )
    assert not message, f"{run.where()}:\n" + "\n".join(message)


@pytest.mark.parametrize("run", NOTEBOOKS[:1], indirect=True, ids=lambda n: n[:2])
def test_01_grid_follows_the_stage_slider_and_the_microbatch_box(run):
    failures = run.interactions()
    assert not failures, f"{run.where()}:\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("run", NOTEBOOKS[5:6], indirect=True, ids=lambda n: n[:2])
def test_06_the_live_view_says_the_job_ended(run):
    failures = run.interactions()
    assert not failures, f"{run.where()}:\n  " + "\n  ".join(failures)


# -- what a person does with each explorer ------------------------------------------------------


def _grid_shows(
    app: lh.Explorer, title_part: str, stages: Optional[int], timeout_s: float = 60
) -> Optional[str]:
    """None once the grid's title contains ``title_part`` (and its stage labels are exactly
    ``stage 0 .. stage stages-1``); else what the grid shows after ``timeout_s``."""
    js = """([part, labels]) => [...document.querySelectorAll('.js-plotly-plot')].some((p) =>
        (p.querySelector('.gtitle')?.textContent || '').includes(part) && (labels === null ||
         JSON.stringify([...p.querySelectorAll('.yaxislayer-above .ytick text')].map((t) => t.textContent.trim())) === JSON.stringify(labels)))"""
    labels = None if stages is None else [f"stage {s}" for s in range(stages)]
    try:
        app.page.wait_for_function(
            js, arg=[title_part, labels], timeout=timeout_s * 1000, polling=250
        )
        return None
    except Exception:
        grid = app.plot("Instruction grid")
        title = grid.locator(".gtitle").text_content() if grid.count() else "(no grid)"
        shown = (
            [t.strip() for t in grid.locator(".yaxislayer-above .ytick text").all_text_contents()]
            if grid.count()
            else []
        )
        return f"grid title {title!r}, stage labels {shown}"


def _schedule_explorer_basics(
    run: NotebookRun, failures: list[str], stages: int, microbatches: int, kind: str
) -> lh.Explorer:
    """Stage slider right by one (keyboard), then micro-batches typed into its box: the grid follows."""
    app = run.explorer()
    shown = _grid_shows(app, f"{kind} · {stages} stages", stages, timeout_s=10)
    if shown:
        failures.append(
            f"after Run All: expected the grid to say '{kind} · {stages} stages' with labels stage 0..{stages - 1}; it shows {shown}"
        )
    app.move_slider("stages", "ArrowRight")
    shown = _grid_shows(app, f"{kind} · {stages + 1} stages", stages + 1)
    if shown:
        failures.append(
            f"stages slider moved to {stages + 1} (keyboard): expected the grid to say '{kind} · {stages + 1} stages' "
            f"with labels stage 0..{stages}; it shows {shown}"
        )
    target = microbatches + 4
    app.type_slider("micro-batches", target)
    shown = _grid_shows(app, f"× {target} micro-batches", None)
    if shown:
        failures.append(
            f"typed {target} into the micro-batches box: expected the grid to say '× {target} micro-batches'; it shows {shown}"
        )
    return app


def _click_a_finding(app: lh.Explorer, failures: list[str]) -> None:
    findings = app.findings()
    if (
        findings.count() == 0
        or not findings.is_visible()
        or findings.locator("option").count() == 0
    ):
        failures.append(
            "expected the findings list to show findings to click; it is empty or hidden"
        )
        return
    app.click_finding(min(1, findings.locator("option").count() - 1))


def _interact_01(run: NotebookRun, failures: list[str]) -> None:
    app = _schedule_explorer_basics(run, failures, 4, 8, "1f1b")
    app.select("schedule", "deepspeed-train")
    app.select("buffers", "fixed")
    app.select("P2P order", "legacy")
    _click_a_finding(app, failures)
    app.act("arrows checkbox", lambda: app.checkbox("send → receive arrows").check())


def _interact_02(run: NotebookRun, failures: list[str]) -> None:
    app = run.explorer()
    _click_a_finding(app, failures)
    app.act("arrows checkbox", lambda: app.checkbox("send → receive arrows").check())
    app.select("P2P order", "fixed")  # issue 10 saw a ValueError in the Log Console here
    app.select("P2P order", "legacy")
    app.move_slider("stages", "ArrowRight")


def _press_run(run: NotebookRun, app: lh.Explorer, label: str, timeout_s: float) -> None:
    """Press Run; wait until the explorer's status text changed and the button is enabled again."""
    before = app.texts()
    button = app.button(label)
    button.scroll_into_view_if_needed()
    start = time.monotonic()
    app.act(f"{label} pressed", lambda: button.click(), timeout_s)
    deadline = start + timeout_s
    seen = {"disabled": False}

    def finished() -> bool:
        enabled = button.is_enabled()
        seen["disabled"] |= not enabled
        return (
            enabled
            and (seen["disabled"] or app.texts() != before)
            and run.nb.wire.kernel_state == "idle"
            and time.monotonic() - run.nb.wire.last_frame >= 2.0
        )

    run.nb.wait_until(
        finished,
        deadline,
        f"the run started by '{label}' to finish (status line changed, button enabled again)",
        500,
    )
    run.nb.page.evaluate(lh.JS_TWO_FRAMES)


def _interact_03(run: NotebookRun, failures: list[str]) -> None:
    app = run.explorer()
    _press_run(run, app, "Run", 300)
    app.move_slider("micro-batches", "ArrowRight")
    app.select("buffers", "fixed")
    app.select("P2P order", "legacy")
    _click_a_finding(app, failures)


def _interact_04(run: NotebookRun, failures: list[str]) -> None:
    app = run.explorer()
    diff_from = app.dropdown("diff from")
    options = diff_from.locator("option").all_inner_texts()
    current = diff_from.input_value()
    values = [o.get_attribute("value") for o in diff_from.locator("option").all()]
    other = next((v for v in values if v != current), None)
    if other is None:
        failures.append(f"the 'diff from' dropdown offers nothing to switch to: {options}")
    else:
        app.select("diff from", other)
    _click_a_marker(run, app, "compiled")
    app.move_slider("steps", "ArrowLeft")
    _press_run(run, app, "Run", 600)


def _click_a_marker(run: NotebookRun, app: lh.Explorer, title_part: str) -> None:
    """Hover and click the first point of the last scatter trace (the new-graph markers)."""
    plot = app.plot(title_part)
    points = plot.locator(".scatterlayer .trace").last.locator("path.point")
    if points.count() == 0:
        return
    plot.scroll_into_view_if_needed()
    box = points.first.bounding_box()
    if not box:
        return
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page = run.nb.page
    page.mouse.move(x, y)
    wire = run.nb.wire
    start = len(wire.messages)
    page.mouse.click(x, y)
    deadline = time.monotonic() + 60
    try:  # a click that reaches the kernel is answered; one that plotly ignores sends nothing
        run.nb.wait_until(
            lambda: any(
                m.direction == "out" and m.msg_type == "comm_msg" for m in wire.messages[start:]
            ),
            time.monotonic() + 5,
            "a click message",
        )
    except AssertionError:
        return
    run.nb.wait_until(
        lambda: wire.answered_since(start) and time.monotonic() - wire.last_frame >= 0.7,
        deadline,
        "the kernel to handle the marker click",
    )


def _interact_05(run: NotebookRun, failures: list[str]) -> None:
    app = run.explorer()
    app.select("scenario", "cycling")
    app.move_slider("iterations", "ArrowRight")
    _press_run(run, app, "Run probe", 600)


def _interact_06(run: NotebookRun, failures: list[str]) -> None:
    """Nothing to press: after Run All the job has ended (``job.wait()``) and the follower was
    stopped, so the status line and the progress bars must not say a rank is running."""
    app = run.explorer()
    said = app.texts()
    if "(running)" in said or "first failure: rank 2" not in said:
        failures.append(f"the live view's status after the job ended says: {said!r}")
    bars = app.plot("Progress per rank")
    labels = " ".join(bars.locator(".bartext").all_text_contents()) if bars.count() else ""
    if "running" in labels:
        failures.append(f"a rank is drawn as running after the job ended: {labels!r}")


INTERACTIONS: dict[str, Callable[[NotebookRun, list[str]], None]] = {
    "01": _interact_01,
    "02": _interact_02,
    "03": _interact_03,
    "04": _interact_04,
    "05": _interact_05,
    "06": _interact_06,
}
