"""The real thing: JupyterLab serves notebook 01, Debian's Chromium runs it, a slider moves the grid.

Nothing is mocked. A fresh JupyterLab (temporary root, settings, workspace and runtime
folders, a random token, a free loopback port) serves a copy of the notebook, so autosave never
touches the committed file. Chromium is Debian's (Playwright cannot download browsers here),
headless, with background networking off, and every request that is not to loopback is
aborted: the test proves the page needs nothing from outside. The assertion is on the DOM
(the grid's title and stage labels as plotly drew them), not on Python state.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = "01_pipeline_schedules.ipynb"
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _settings(folder: Path) -> None:
    """No news popup, no update check, and every cell kept in the DOM (windowingMode none)."""
    files = {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    }
    for name, value in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


@pytest.fixture
def lab(tmp_path, explorer_kernel):
    """A running JupyterLab on loopback; yields (base url, token); stops it afterwards."""
    root, settings = tmp_path / "root", tmp_path / "settings"
    root.mkdir()
    shutil.copy(REPO / "notebooks" / NOTEBOOK, root / NOTEBOOK)
    _settings(settings)
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(settings), "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "ws"),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime")}
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("JupyterLab did not start:\n" + (tmp_path / "lab.log").read_text()[-3000:])
                time.sleep(0.3)
        yield base, token
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _loopback_only(route) -> None:
    host = urlparse(route.request.url).hostname
    if host in ("127.0.0.1", "localhost", "::1") or route.request.url.startswith(("data:", "blob:")):
        route.continue_()
    else:
        route.abort()


def test_stage_slider_redraws_the_grid_in_jupyterlab(lab, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("Debian's chromium is not installed: run `make chromium` (apt-get install chromium)")
    base, token = lab
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=[
            "--no-sandbox", "--disable-background-networking", "--disable-component-update",
            "--disable-default-apps", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"])
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.route("**/*", _loopback_only)
            page.goto(f"{base}/lab/tree/{NOTEBOOK}?token={token}")
            page.get_by_text("Python (explorer) | Idle").wait_for(timeout=60_000)
            page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
            page.locator('[data-command="runmenu:run-all"]').click()

            grid = page.locator(".js-plotly-plot", has=page.locator(".gtitle", has_text="Instruction grid · 1f1b"))
            grid.wait_for(timeout=120_000)
            assert _stage_labels(grid) == [f"stage {s}" for s in range(4)]
            before = grid.locator(".gtitle").text_content()
            assert "4 stages" in before

            handle = page.locator(".widget-slider .noUi-handle").first
            handle.scroll_into_view_if_needed()
            handle.focus()
            handle.press("ArrowRight")
            grid.locator(".gtitle", has_text="1f1b · 5 stages").wait_for(timeout=30_000)
            page.wait_for_function(
                """() => [...document.querySelectorAll('.js-plotly-plot')].some(p =>
                       (p.querySelector('.gtitle')?.textContent || '').includes('1f1b · 5 stages') &&
                       p.querySelectorAll('.yaxislayer-above .ytick').length === 5)""", timeout=30_000)
            assert _stage_labels(grid) == [f"stage {s}" for s in range(5)]
            stderr = page.locator('[data-mime-type="application/vnd.jupyter.stderr"]').all_text_contents()
            assert stderr == [], f"the notebook printed warnings or errors: {stderr}"
            grid.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "explorer_after_slider.png"), full_page=False)
            assert (tmp_path / "explorer_after_slider.png").stat().st_size > 10_000
        finally:
            browser.close()


def _stage_labels(grid) -> list[str]:
    return [t.strip() for t in grid.locator(".yaxislayer-above .ytick text").all_text_contents()]
