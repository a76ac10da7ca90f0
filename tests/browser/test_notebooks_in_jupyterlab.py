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
  leaving deepspeed-train with buffers = fixed resets buffers and order (no CLI words, later
  changes still count); interleaving gets 2 chunks; the sizes map follows a chosen fix and is
  marked once the kind changes; "zoom to it again" returns to a finding after zooming away;
* in 02, by its own "Try it" steps (Check every size on the seed's schedule, then P2P order ->
  fixed), the map says it describes the earlier settings; then, on the same page (one Run All),
  the sizes panel: hover and click the smallest failing size, search for a fix, choose it;
* in 03, the notebook's own run is shown (not re-run); a failed run of the seed's schedule
  selects its finding and says why; the failure prints in sentences, not as a raw dict;
* in 04, the controls show the opened run (scenario, steps), and a click on a new-graph marker
  shows that graph's diff (the test fails when no marker is drawn or no diff follows);
* in 05, the explorer that opened a recorded job shows no scenario, no "backend -", and Run off;
* in 06, once the job ended and the follower stopped, the live view says so: no "(running)" and
  no rank drawn as running (torchrun kills the rank that never failed itself); the hung job's
  follower shows the doctor's verdict, the diagnose button and the verdict pinned on its grid.

Each notebook is saved by the page right after Run All (before any interaction, as nbclient
would have left it) and the saved file must hold the notebook's own claims, the same
assertions (``tests/notebook_claims.py``) the nbclient test of each notebook makes on its own
execution. A run that selects both executes each notebook once, here: the nbclient test of a
notebook whose lab check is selected is deselected (``conftest.py`` beside this file).

A screenshot per notebook goes to ``$EXPLORER_SHOTS`` (default: a pytest temporary folder); the
paths are printed. Notebooks 03–05 run real torch, torch_xla and torch.compile work: minutes here.
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import lab_harness as lh
import pytest
from notebook_claims import CLAIMS, MARK
from plotly_point import click_pixel

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
    "06": "follower = JobFollower(",  # the first job's follower (a second one follows the contract job)
}
#: Files a notebook reads beside it, copied to the same place relative to the served copy
#: (06 starts ``../tests/data/deepspeed_user_job.py`` with torchrun).
BESIDE = {"06": ["tests/data"]}
WIDE, NARROW, HEIGHT = 1500, 1200, 1000
FIRST_DISPLAY_WAIT_S = 30  # how long the page may take to finish drawing once the kernel is idle
#: The seed's schedule over the panel's default range (2-8:1-16) first fails here (the CLI test
#: of the same sweep says so too).
SMALLEST = (3, 3)


def _notebook(name: str, *marks: pytest.MarkDecorator) -> object:
    """``name`` as a parameter of ``run``, with the id ``[NN]`` (its number).

    ``run`` is a module fixture, so it is set up once per notebook in each pytest-xdist worker
    that runs one of its tests: under ``pytest -n`` every test whose id ends in a notebook's
    ``[NN]`` goes to one worker (``pytest_xdist_make_scheduler`` in ``tests/conftest.py``).
    """
    return pytest.param(name, marks=list(marks), id=name[:2])


# Page position of the centre of the heatmap cell at (micro-batches, stages), from plotly's own axes.
JS_CELL_XY = """([plot, m, p]) => {
  const gd = plot; const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
  const r = gd.getBoundingClientRect();
  return {x: r.left + xa._offset + xa.l2p(m), y: r.top + ya._offset + ya.l2p(p)};
}"""
# Points the page draws in the grid's trace called ``name`` (plotly's decoded data on the element).
JS_TRACE_POINTS = """([plot, name]) => {
  const t = (plot._fullData || []).find((d) => d.name === name);
  if (!t) return -1;
  const xs = t.x && t.x.length !== undefined ? Array.from(t.x) : [];
  return xs.filter((v) => v !== null && v !== undefined && !Number.isNaN(v)).length;
}"""


def _plot_fills(nb: lh.NotebookPage, title_part: str) -> str | None:
    """None when the figure titled ``title_part`` fills 90 % of its output area; else what is drawn."""
    plots = [p for p in nb.plots() if title_part in p["title"]]
    if not plots:
        return f"no figure titled '{title_part}' on the page"
    narrow = lh.narrow_widget_plots(plots)
    return "; ".join(lh.describe_plot(p) for p in narrow) or None


def _wait_for(nb: lh.NotebookPage, condition, what: str, timeout_s: float = 120) -> None:
    nb.wait_until(condition, time.monotonic() + timeout_s, what, 250)


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
    #: The notebook as the page saved it after Run All (nbformat), or why it could not be saved.
    saved: object = None
    save_failure: str = ""
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


@pytest.fixture(scope="module", params=[_notebook(n) for n in NOTEBOOKS])
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
            try:  # before any interaction: what nbclient's run of the notebook would hold
                r.saved = nb.save()
            except Exception as exc:  # only the claims test needs it; the others still run
                r.save_failure = f"{type(exc).__name__}: {exc}"
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


@pytest.mark.parametrize(
    "run",
    [_notebook(n, getattr(pytest.mark, MARK)(n[:2], "lab")) for n in NOTEBOOKS],
    indirect=True,
)
def test_the_notebooks_own_claims_hold_on_the_lab_run(run):
    """The notebook's claims (what its nbclient test asserts), on the file the page saved after
    Run All: every code cell executed, no error output, then the same assertions."""
    assert run.saved is not None, (
        f"{run.where()}: the page did not save the notebook: {run.save_failure}"
    )
    code = [c for c in run.saved.cells if c.cell_type == "code"]
    unexecuted = [
        c.source.splitlines()[0] for c in code if c.source.strip() and c.execution_count is None
    ]
    assert not unexecuted, f"{run.where()}: cells saved without an execution count: {unexecuted}"
    errors = [f"{o.ename}: {o.evalue}" for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{run.where()}: cells saved with an error: {errors}"
    CLAIMS[run.key](run.saved)


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


@pytest.mark.parametrize("run", [_notebook(n) for n in NOTEBOOKS[:1]], indirect=True)
def test_01_grid_follows_the_stage_slider_and_the_microbatch_box(run):
    failures = run.interactions()
    assert not failures, f"{run.where()}:\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("run", [_notebook(n) for n in NOTEBOOKS[5:6]], indirect=True)
def test_06_the_live_view_says_the_job_ended(run):
    failures = run.interactions()
    assert not failures, f"{run.where()}:\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("run", [_notebook(n) for n in NOTEBOOKS[1:2]], indirect=True)
def test_02_sizes_map_click_fix_and_apply(run):
    """02's "every size" panel, after its "Try it" steps (the same Run All, not another): a person
    presses *Check every size*, hovers the outlined smallest failing size, clicks it, presses
    *Search for a fix* and chooses the first candidate. The map fills its width and its hover
    names the size and its first finding; the click loads that size with its first finding
    selected; the candidates are as wide as the explorer, best first; choosing one redraws the
    grid at the same size with its rules named and the moved instructions outlined; no kernel
    error, stderr or browser error on the way."""
    failures = run.interactions()
    assert not failures, f"{run.where()}:\n  " + "\n  ".join(failures)
    nb = run.nb
    page = nb.page
    app = run.explorer()
    paths = run.screenshots

    def shot(name: str, target=None) -> None:
        run.shot(f"sizes_{name}", target)

    # 1. Check every size: the verdict map, full width, smallest failing size named.
    check = app.button("Check every size")
    check.scroll_into_view_if_needed()
    app.act("Check every size", lambda: check.click(), timeout_s=300)
    heat = app.plot("Every size")
    _wait_for(nb, lambda: heat.count() > 0, "the verdict map to be drawn")
    assert f"smallest failing size: {SMALLEST[0]} stages x {SMALLEST[1]} micro-batches" in (
        app.texts()
    ), app.texts()
    heat.scroll_into_view_if_needed()
    shot("map", heat)
    narrow = _plot_fills(nb, "Every size")
    assert narrow is None, f"verdict map narrower than its output area: {narrow} ({paths})"

    # 2. Hover the smallest failing size: the label names the size and its first finding.
    at = page.evaluate(JS_CELL_XY, [heat.element_handle(), SMALLEST[1], SMALLEST[0]])
    page.mouse.move(at["x"], at["y"])
    hover = app.root.locator(".hoverlayer .hovertext")
    _wait_for(nb, lambda: hover.count() > 0, "the hover label on the verdict map", 30)
    said = " ".join(hover.first.locator("text").all_text_contents())
    shot("map_hover", heat)
    assert re.search(
        rf"{SMALLEST[0]} stages x {SMALLEST[1]} micro-batches: stage \d+ step \d+: SendGrad", said
    ), f"hover over {SMALLEST[0]}x{SMALLEST[1]} says {said!r} ({paths})"

    # 3. Click it: the grid shows that size with the first finding selected.
    app.act("click the smallest failing size", lambda: page.mouse.click(at["x"], at["y"]))
    grid = app.plot("Instruction grid")
    title = f"{SMALLEST[0]} stages × {SMALLEST[1]} micro-batches"
    _wait_for(nb, lambda: title in (grid.locator(".gtitle").text_content() or ""), title)
    findings = app.findings()
    _wait_for(nb, lambda: findings.evaluate("s => s.selectedIndex") == 0, "finding 0 selected")
    selected = findings.evaluate("s => s.options[s.selectedIndex].textContent")
    assert "SendGrad" in selected, f"the selected finding is {selected!r}"
    labels = [t.strip() for t in grid.locator(".yaxislayer-above .ytick text").all_text_contents()]
    assert labels == [f"stage {s}" for s in range(SMALLEST[0])], labels
    grid.scroll_into_view_if_needed()
    shot("size_loaded", grid)

    # 4. Search for a fix: candidates listed best first, as wide as the explorer.
    fix = app.button("Search for a fix")
    fix.scroll_into_view_if_needed()
    app.act("Search for a fix", lambda: fix.click(), timeout_s=600)
    candidates = app.root.locator(
        ".widget-select select", has=page.locator("option", has_text="grads-first")
    )
    _wait_for(nb, lambda: candidates.count() > 0, "the candidate list", 60)
    first = candidates.locator("option").first.text_content().replace("\xa0", " ")
    assert first.startswith("grads-first: buffers at 4x8 4,3,2,2"), first
    box, whole = candidates.bounding_box(), app.root.bounding_box()
    candidates.scroll_into_view_if_needed()
    shot("candidates", app.root.locator(".widget-select", has=candidates))
    assert box["width"] >= 0.9 * whole["width"], (
        f"candidate list {box['width']:.0f} px wide in an explorer {whole['width']:.0f} px wide ({paths})"
    )
    # a reorder that breaks the pairing of blocking P2P is rejected, and why is said
    assert re.search(r"Rejected: .*defer-recv fails at 2x2 \(deadlock\)", app.texts()), app.texts()

    # 5. Choose it: the grid is redrawn with the moved instructions outlined, rules named.
    app.act("choose candidate 1", lambda: candidates.select_option(index=0))
    _wait_for(
        nb,
        lambda: page.evaluate(JS_TRACE_POINTS, [grid.element_handle(), "moved by the fix"]) > 0,
        "the moved instructions outlined on the grid",
    )
    assert "rules applied: grads-first" in app.texts(), f"rules not named: {app.texts()}"
    assert title in (grid.locator(".gtitle").text_content() or ""), "the grid changed size"
    grid.scroll_into_view_if_needed()
    shot("fix_applied", grid)
    narrow = _plot_fills(nb, "Instruction grid")
    assert narrow is None, f"grid narrower than its output area after the fix: {narrow}"

    # 6. Nothing went wrong on the way, in cells or in widget callbacks (Run All's own are
    # asserted by test_no_error_or_stderr_after_run_all_and_interactions).
    problems = [str(p) for p in nb.problems()]
    stderr = [f"{o['cell']}: {o['text'].strip()}" for o in nb.stderr_outputs()]
    assert not problems and not stderr, (
        f"errors after the sizes interactions ({paths}):\n  " + "\n  ".join(problems + stderr)
    )


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


def _drawn(nb: lh.NotebookPage, condition: Callable[[], bool]) -> bool:
    """Whether the page shows ``condition`` within 15 s. The caller waited for the kernel to
    answer; a busy browser may draw the answer a moment after its last frame (what is judged is
    what stays)."""
    try:
        _wait_for(nb, condition, "the page to draw the kernel's answer", 15)
    except AssertionError:
        return False
    return True


def _expect(failures: list[str], app: lh.Explorer, after: str, said: str, absent: str = "") -> None:
    """The explorer's text must say ``said`` (and not ``absent``) after ``after`` (:func:`_drawn`)."""

    def holds() -> bool:
        text = app.texts()
        return said in text and not (absent and absent in text)

    if not _drawn(app.nb, holds):
        text = app.texts()
        missing = f"'{said}'" + (f" and no '{absent}'" if absent else "")
        failures.append(f"after {after}: expected the explorer to say {missing}; it says {text!r}")


def _check_sizes(app: lh.Explorer) -> None:
    button = app.button("Check every size")
    button.scroll_into_view_if_needed()
    app.act("Check every size", lambda: button.click(), timeout_s=300)


def _grid_range(app: lh.Explorer) -> list:
    """The grid's x range as the page draws it."""
    grid = app.plot("Instruction grid")
    return grid.evaluate("(gd) => gd._fullLayout.xaxis.range.slice()")


def _zoom_away_and_back(run: NotebookRun, app: lh.Explorer, failures: list[str]) -> None:
    """Drag-zoom the grid away from the selected finding, then "zoom to it again": back."""
    near = _grid_range(app)
    grid = app.plot("Instruction grid")
    grid.scroll_into_view_if_needed()
    box = grid.evaluate(
        """(gd) => { const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, r = gd.getBoundingClientRect();
        return {left: r.left + xa._offset, width: xa._length, top: r.top + ya._offset, height: ya._length}; }"""
    )
    y = box["top"] + box["height"] / 2
    page = run.nb.page

    def drag() -> None:
        page.mouse.move(box["left"] + 0.85 * box["width"], y)
        page.mouse.down()
        page.mouse.move(box["left"] + 0.92 * box["width"], y, steps=5)
        page.mouse.move(box["left"] + 0.99 * box["width"], y, steps=5)
        page.mouse.up()

    app.act("drag-zoom the grid away from the finding", drag)
    away = _grid_range(app)
    if away[1] - away[0] > 0.5 * (near[1] - near[0]) or away[0] < near[0] + 0.5 * (
        near[1] - near[0]
    ):
        failures.append(f"drag-zooming the grid's right end drew it at {away} (it was at {near})")
        return
    again = app.button("zoom to it again")
    if again.count() == 0 or not again.is_visible():
        failures.append("no 'zoom to it again' button beside the selected finding")
        return
    app.act("zoom to it again", lambda: again.click())
    back = _grid_range(app)
    if [round(v, 3) for v in back] != [round(v, 3) for v in near]:
        failures.append(
            f"'zoom to it again' drew the grid at {back}, not back at the finding ({near})"
        )


def _interact_01(run: NotebookRun, failures: list[str]) -> None:
    app = _schedule_explorer_basics(run, failures, 4, 8, "1f1b")
    app.select("schedule", "deepspeed-train")
    app.select("buffers", "fixed")
    app.select("P2P order", "legacy")
    _click_a_finding(app, failures)
    _zoom_away_and_back(run, app, failures)
    app.act("arrows checkbox", lambda: app.checkbox("send → receive arrows").check())
    # a proven fix, chosen: the map becomes its proof, not the red map of the schedule before
    _check_sizes(app)
    fix = app.button("Search for a fix")
    fix.scroll_into_view_if_needed()
    app.act("Search for a fix", lambda: fix.click(), timeout_s=600)
    candidates = app.root.locator(
        ".widget-select select", has=run.nb.page.locator("option", has_text="grads-first")
    )
    if candidates.count() == 0:
        failures.append(f"no fix candidates after Search for a fix: {app.texts()!r}")
        return
    app.act("choose the first fix", lambda: candidates.select_option(index=0))
    _expect(
        failures,
        app,
        "choosing the fix grads-first",
        "deepspeed-train (buffers fixed, P2P order legacy, rules grads-first): no hazard",
        "This map describes",
    )
    # leaving deepspeed-train with buffers = fixed: reset, said in the page's words, not a dead end
    app.select("schedule", "1f1b")
    _expect(failures, app, "switching to 1f1b", "buffers set to default for 1f1b", "--buffers")
    _expect(failures, app, "switching to 1f1b", "This map describes deepspeed-train")
    if app.dropdown("buffers").input_value() != "default":
        failures.append(f"buffers shows {app.dropdown('buffers').input_value()!r} under 1f1b")
    app.move_slider("stages", "ArrowRight")
    shown = _grid_shows(app, "1f1b · 6 stages", 6)
    if shown:
        failures.append(f"after 1f1b and one more stage the grid shows {shown}")
    app.select(
        "schedule", "interleaved-1f1b"
    )  # basics typed 12 micro-batches: 6 stages divide them
    chunks = app.slider_readout("chunks / rank")
    if chunks.inner_text().strip() != "2":
        failures.append(
            f"interleaved-1f1b chosen: chunks / rank shows {chunks.inner_text()!r}, not 2"
        )
    shown = _grid_shows(app, "interleaved-1f1b · 12 stages", None)
    if shown:
        failures.append(f"interleaved-1f1b with 2 chunks on 6 ranks: the grid shows {shown}")
    _overview_alternates(run, app, failures)


# The share of rank 32's busy overview columns whose two half-rows hold different kinds.
JS_MIXED_COLUMNS = """(gd) => {
  const t = (gd._fullData || []).find((d) => d.name === 'instructions' && d.type === 'heatmap');
  if (!t || !t.z || t.z.length < 66) return -1;
  const up = Array.from(t.z[64]), down = Array.from(t.z[65]);
  const busy = up.map((u, i) => [u, down[i]]).filter(([u, d]) => u !== null && !Number.isNaN(u));
  return busy.filter(([u, d]) => u !== d).length / Math.max(busy.length, 1);
}"""


def _overview_alternates(run: NotebookRun, app: lh.Explorer, failures: list[str]) -> None:
    """At 64 x 512 the timeline is an overview; 1F1B's steady state must read as alternating
    (two kinds per column), not as solid backward like GPipe's drain."""
    app.select("schedule", "1f1b")
    app.type_slider("stages", 64)
    app.type_slider("micro-batches", 512)
    timeline = app.plot("Timeline")
    if timeline.count() == 0:
        failures.append("no timeline at 64 x 512")
        return
    timeline.scroll_into_view_if_needed()
    run.shot("overview_64x512", timeline)
    mixed = timeline.evaluate(JS_MIXED_COLUMNS)
    if mixed < 0.5:
        failures.append(
            f"1f1b at 64 x 512: only {mixed:.0%} of rank 32's overview columns show two kinds "
            "(-1: no two-row overview drawn); its steady state alternates forward and backward"
        )


def _interact_02(run: NotebookRun, failures: list[str]) -> None:
    """02's "Try it": check every size on the seed's schedule, then P2P order -> fixed."""
    app = run.explorer()
    _click_a_finding(app, failures)
    app.act("arrows checkbox", lambda: app.checkbox("send → receive arrows").check())
    _check_sizes(app)
    _expect(failures, app, "Check every size", "84 of 112 sizes in 2-8:1-16 have findings")
    app.select("P2P order", "fixed")  # issue 10 saw a ValueError in the Log Console here
    _expect(failures, app, "P2P order -> fixed", "no findings")
    _expect(
        failures,
        app,
        "P2P order -> fixed",
        "This map describes deepspeed-train (buffers fixed, P2P order legacy), not the schedule "
        "above (deepspeed-train (buffers fixed, P2P order fixed))",
    )
    run.shot("map_marked", app.plot("Every size"))
    title = app.plot("Every size").locator(".gtitle").text_content() or ""
    if "This map describes" not in title:
        failures.append(
            f"the map's own title does not say it describes earlier settings: {title!r}"
        )
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
    """The notebook already ran today's schedule through the explorer: it is not run again. The
    seed's schedule is, and fails: its finding is selected, and the page says why."""
    app = run.explorer()
    _expect(failures, app, "the notebook's app.run()", "bitwise equal to the reference")
    printed = run.nb.output_of("predicted = min(").inner_text()
    if "measured:  rank" not in printed or "{'" in printed or "\\n" in printed:
        failures.append(f"the seed's failure is not said in sentences: {printed[-800:]!r}")
    app.select("buffers", "fixed")
    app.select("P2P order", "legacy")
    _press_run(run, app, "Run", 300)
    _expect(failures, app, "a failed run", "the run failed here (rank 2, stage 2, step 6)")
    _expect(failures, app, "a failed run", "run failed")


def _interact_04(run: NotebookRun, failures: list[str]) -> None:
    app = run.explorer()
    shown = (app.dropdown("scenario").input_value(), app.slider_readout("steps").inner_text())
    if shown != ("logging", "6"):
        failures.append(
            f"the explorer opened the logging run (6 steps) but its controls show {shown}"
        )
    _expect(failures, app, "XlaExplorer.open", "Run runs it again")
    diff_from = app.dropdown("diff from")
    options = diff_from.locator("option").all_inner_texts()
    current = diff_from.input_value()
    values = [o.get_attribute("value") for o in diff_from.locator("option").all()]
    other = next((v for v in values if v != current), None)
    if other is None:
        failures.append(f"the 'diff from' dropdown offers nothing to switch to: {options}")
    else:
        app.select("diff from", other)
    _click_a_marker(run, app, "compiled", failures)
    # a fresh run, not the one on screen again: the cheapest scenario, 2 steps
    app.select("scenario", "steady")
    app.type_slider("steps", 2)
    _press_run(run, app, "Run", 600)
    _expect(failures, app, "running steady for 2 steps", "steady")


def _click_a_marker(
    run: NotebookRun, app: lh.Explorer, title_part: str, failures: list[str]
) -> None:
    """Click the last new-graph marker (the timeline's last trace): the diff must become
    "<closest> -> <that graph>". Fails when no marker is drawn, the click sends nothing or no
    such diff appears (it used to return silently, so the click was never checked)."""
    plot = app.plot(title_part)
    points = plot.locator(".scatterlayer .trace").last.locator("path.point")
    if plot.count() == 0 or points.count() == 0:
        failures.append(f"no new-graph marker drawn on the figure titled '{title_part}'")
        return
    hashes = plot.evaluate("(gd) => Array.from(gd.data[gd.data.length - 1].customdata || [])")
    target = str(hashes[-1])[:8] if hashes else ""
    to = app.dropdown("to")  # diff something else first, so the click's diff is new
    other = next(
        (
            o.get_attribute("value")
            for o in to.locator("option").all()
            if target not in (o.text_content() or "")
        ),
        None,
    )
    if other is not None:
        app.select("to", other)
    plot.scroll_into_view_if_needed()
    box = points.nth(points.count() - 1).bounding_box()
    if not box or not target:
        failures.append(f"the last new-graph marker has no box or no graph hash ({hashes})")
        return
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    wire = run.nb.wire
    start = len(wire.messages)
    try:  # a click that reaches the kernel is answered; one that plotly ignores sends nothing
        click_pixel(run.nb.page, plot, (x, y), (None, None, hashes[-1]))
        run.nb.wait_until(
            lambda: any(
                m.direction == "out" and m.msg_type == "comm_msg" for m in wire.messages[start:]
            ),
            time.monotonic() + 10,
            "a click message",
        )
        run.nb.wait_until(
            lambda: wire.answered_since(start) and time.monotonic() - wire.last_frame >= 0.7,
            time.monotonic() + 60,
            "the kernel to handle the marker click",
        )
    except AssertionError as exc:
        failures.append(f"clicking the new-graph marker of graph {target}: {exc}")
        return

    def titles() -> str:
        return " | ".join(app.root.locator(".js-plotly-plot .gtitle").all_text_contents())

    if not _drawn(run.nb, lambda: f"-> {target}" in titles()):
        failures.append(
            f"clicking the new-graph marker of graph {target} showed no diff to it; titles: {titles()}"
        )


def _interact_05(run: NotebookRun, failures: list[str]) -> None:
    opened = lh.Explorer(run.nb, "CompileExplorer.open(")
    run.shot("opened_job", opened.root)
    said = opened.texts()
    if "backend -" in said or "choose a scenario to probe one" not in said:
        failures.append(f"the explorer on the recorded job says: {said!r}")
    if opened.dropdown("scenario").input_value() != "" or opened.button("Run probe").is_enabled():
        failures.append(
            "the explorer on the recorded job shows scenario "
            f"{opened.dropdown('scenario').input_value()!r} with Run probe enabled"
        )
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
    # the job that stopped moving: its follower said the doctor's verdict and pinned it
    hung = lh.Explorer(run.nb, "hung = JobFollower(")
    run.shot("hung_job", hung.root)
    said = hung.texts()
    if "diagnosis: rank 0 waits on rank 1: stage 1 (rank 1) sleeps at" not in said:
        failures.append(f"the hung job's follower says: {said!r}")
    if not hung.button("diagnose").count():
        failures.append("the hung job's follower shows no diagnose button")
    if not hung.plot("HUNG: rank 0 waits on rank 1").count():
        failures.append("the hung job's grid does not show the verdict pinned on it")


INTERACTIONS: dict[str, Callable[[NotebookRun, list[str]], None]] = {
    "01": _interact_01,
    "02": _interact_02,
    "03": _interact_03,
    "04": _interact_04,
    "05": _interact_05,
    "06": _interact_06,
}
