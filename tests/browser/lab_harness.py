"""A real JupyterLab on loopback, Debian's Chromium driving it, and what the page really shows.

Used by the browser tests (``tests/browser``) and by ``benchmarks/bench_browser.py`` (which puts
this folder on ``sys.path``); it is not part of the ``explorer`` package.

* :class:`Lab` starts ``jupyter lab`` in a temporary root (its own settings, workspace and runtime
  folders, a random token, a free loopback port) with copies of the notebooks, so saving never
  touches the committed files. Settings turn off the news/update check, notebook windowing
  (every cell stays in the DOM, so the tests can see all outputs) and autosave (the page saves
  only when a test says so; see :func:`write_settings`).
* :class:`Browser` launches Debian's ``chromium`` headless through Playwright (browsers cannot be
  downloaded here) with background networking off; every request that is not to loopback is
  aborted and recorded, which proves the page needs nothing from outside.
* :class:`NotebookPage` opens one notebook, runs it with the *Run → Run All Cells* menu, and
  listens to the kernel's websocket. It decodes both wire formats JupyterLab may use: the binary
  ``v1.kernel.websocket.jupyter.org`` protocol (a little-endian offset table, then channel,
  header, parent header, metadata, content and buffers) and the legacy JSON text frames (binary
  legacy frames carry a big-endian offset table before the JSON). From those frames it keeps:
  every iopub ``error`` and ``stderr`` stream, including those whose parent is a ``comm_msg``
  (exceptions in widget callbacks, which JupyterLab shows only in its Log Console); which
  execute requests are still waiting for their reply; and the size of every ``comm_msg`` frame
  per widget model (the benchmark's figure-JSON bytes). Browser console errors and uncaught page
  errors are kept too.

Waits are conditions with deadlines (the machine is small and shared), never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Union
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
KERNELS = REPO / "kernels"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
STDERR_MIME = "application/vnd.jupyter.stderr"
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
]
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


# -- kernels and JupyterLab -------------------------------------------------------------------


def ensure_kernels(names: Iterable[str] = ("explorer", "explorer-xla")) -> None:
    """Install the kernel specs the notebooks name into this environment when missing (as ``make kernels``)."""
    from jupyter_client.kernelspec import KernelSpecManager

    found = KernelSpecManager().find_kernel_specs()
    for name in names:
        if name not in found:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "jupyter",
                    "kernelspec",
                    "install",
                    "--sys-prefix",
                    "--replace",
                    str(KERNELS / name),
                ],
                check=True,
                capture_output=True,
            )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_settings(folder: Path) -> None:
    """No news popup, no update check, every cell kept in the DOM (windowingMode none), no autosave.

    Autosave is off because the page saves only when a test says so (:meth:`NotebookPage.save`).
    JupyterLab's autosave writes a dirty notebook every 120 s, and Run All takes longer than that
    on a busy 2-core machine. When its write overlapped the test's Save (a 10 MB notebook takes
    seconds to write there), JupyterLab's check before saving found the file changed on disk by
    its own unfinished save and opened the modal "File Changed" dialog. The dialog keeps the
    keyboard focus for the rest of the page's life: a later key press on a slider went to the
    dialog's button, and nothing reached the kernel.
    """
    files = {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false",
            "checkForUpdates": False,
        },
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    }
    for name, value in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))


class Lab:
    """A JupyterLab server on loopback serving copies of ``notebooks`` from a fresh temporary root.

    ``notebooks`` maps a file name to a source path or to notebook JSON (a dict), so a caller can
    serve a committed notebook or one it generated. Use as a context manager.
    """

    def __init__(
        self, workdir: Path, notebooks: dict[str, Union[Path, dict]], start_timeout_s: float = 120
    ) -> None:
        self.workdir = Path(workdir)
        self.root = self.workdir / "root"
        self.notebooks = notebooks
        self.start_timeout_s = start_timeout_s
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = self.workdir / "lab.log"
        self.proc: Optional[subprocess.Popen] = None
        self._log = None

    def __enter__(self) -> "Lab":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for name, source in self.notebooks.items():
            if isinstance(source, dict):
                (self.root / name).write_text(json.dumps(source))
            else:
                shutil.copy(source, self.root / name)
        settings = self.workdir / "settings"
        write_settings(settings)
        env = {
            **os.environ,
            "JUPYTERLAB_SETTINGS_DIR": str(settings),
            "JUPYTERLAB_WORKSPACES_DIR": str(self.workdir / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(self.workdir / "runtime"),
        }
        cmd = [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        self._log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            cmd, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=self.root
        )
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{self.base}/api/status?token={self.token}", timeout=5)
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(
                        f"JupyterLab did not start within {self.start_timeout_s:.0f} s:\n"
                        + self.log_tail()
                    ) from None
                time.sleep(0.3)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def url(self, notebook: str) -> str:
        """The notebook alone (``reset``: no tabs restored from an earlier page's workspace)."""
        return f"{self.base}/lab/tree/{notebook}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        """Stop every kernel session of this server (frees memory between measurements)."""
        headers = {"Authorization": f"token {self.token}"}
        with urllib.request.urlopen(
            urllib.request.Request(f"{self.base}/api/sessions", headers=headers), timeout=30
        ) as r:
            sessions = json.load(r)
        for s in sessions:
            req = urllib.request.Request(
                f"{self.base}/api/sessions/{s['id']}", headers=headers, method="DELETE"
            )
            urllib.request.urlopen(req, timeout=60).close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None


# -- the browser -----------------------------------------------------------------------------


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        raise AssertionError(
            "Debian's chromium is not installed: run `make chromium` (apt-get install chromium)"
        )
    return path


class Browser:
    """Playwright's sync API with Debian's Chromium, headless, loopback only. Use as a context manager."""

    def __init__(self, init_scripts: Iterable[str] = ()) -> None:
        self.init_scripts = list(init_scripts)
        self._pw = None
        self.browser = None

    def __enter__(self) -> "Browser":
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self.browser = self._pw.chromium.launch(
            executable_path=chromium_path(), headless=True, args=CHROMIUM_FLAGS
        )
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self.browser is not None:
                self.browser.close()
        finally:
            if self._pw is not None:
                self._pw.stop()

    def new_page(self, width: int = 1500, height: int = 1000):
        page = self.browser.new_page(viewport={"width": width, "height": height})
        for script in self.init_scripts:
            page.add_init_script(script)
        return page


# -- the kernel's websocket ------------------------------------------------------------------


@dataclass
class WireMessage:
    """One kernel message as it crossed the page's websocket."""

    direction: str  # "in" (kernel -> page) or "out" (page -> kernel)
    channel: str
    msg_type: str
    msg_id: str
    parent_type: str
    parent_id: str
    content: dict
    size: int  # bytes of the whole frame (JSON and binary buffers)
    t: float  # time.monotonic() when Playwright delivered it


def _loads(part: Union[bytes, str]) -> dict:
    try:
        value = json.loads(part)
    except (ValueError, UnicodeDecodeError):
        return {}
    return value if isinstance(value, dict) else {}


def decode_frame(
    payload: Union[str, bytes], protocol_v1: Optional[bool] = None
) -> Optional[tuple[str, dict, dict, dict]]:
    """``(channel, header, parent_header, content)`` of one websocket frame, or None.

    Text frames are the legacy JSON protocol. Binary frames are the ``v1`` protocol (first 8
    bytes: the number of offsets, little-endian) or legacy messages with buffers (first 4 bytes:
    the number of buffers, big-endian, then 4-byte offsets, the first pointing at the JSON).
    """
    if isinstance(payload, str):
        msg = _loads(payload)
        if not msg:
            return None
        return (
            msg.get("channel", ""),
            msg.get("header") or {},
            msg.get("parent_header") or {},
            msg.get("content") or {},
        )
    data = bytes(payload)
    if protocol_v1 is not False and len(data) >= 16:
        n = int.from_bytes(data[:8], "little")
        if 3 <= n <= 4096 and len(data) >= 8 * (n + 1):
            offsets = [int.from_bytes(data[8 * (i + 1) : 8 * (i + 2)], "little") for i in range(n)]
            if (
                offsets[0] == 8 * (n + 1)
                and all(a <= b for a, b in zip(offsets, offsets[1:]))
                and offsets[-1] <= len(data)
            ):
                channel = data[offsets[0] : offsets[1]].decode("utf-8", "replace")
                parts = [data[offsets[i] : offsets[i + 1]] for i in range(1, n - 1)]
                parts += [b"{}"] * (4 - len(parts))
                return channel, _loads(parts[0]), _loads(parts[1]), _loads(parts[3])
    if len(data) >= 8:
        nbufs = int.from_bytes(data[:4], "big")
        if 1 <= nbufs <= 4096 and len(data) >= 4 * (nbufs + 1):
            start = int.from_bytes(data[4:8], "big")
            end = int.from_bytes(data[8:12], "big") if nbufs > 1 else len(data)
            msg = _loads(data[start:end])
            if msg:
                return (
                    msg.get("channel", ""),
                    msg.get("header") or {},
                    msg.get("parent_header") or {},
                    msg.get("content") or {},
                )
    return None


@dataclass
class Problem:
    """Something a user would see as an error: an iopub error/stderr, a console error, a page error."""

    source: str  # "iopub error", "iopub stderr", "console", "pageerror"
    where: str  # "cell: <first line>", "widget callback (comm_msg ...)", a URL ...
    text: str

    def __str__(self) -> str:
        return f"[{self.source}] {self.where}: {self.text.strip()}"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass
class Wire:
    """Everything the page's kernel websockets carried, decoded."""

    messages: list[WireMessage] = field(default_factory=list)
    requests: dict[str, str] = field(default_factory=dict)  # execute_request msg_id -> code
    replies: dict[str, str] = field(default_factory=dict)  # execute_request msg_id -> reply status
    sent_comm: dict[str, str] = field(
        default_factory=dict
    )  # page comm_msg msg_id -> short description
    problems: list[Problem] = field(default_factory=list)
    idle_for: set = field(default_factory=set)  # msg_ids the kernel reported idle after
    kernel_state: str = "unknown"
    last_frame: float = field(default_factory=time.monotonic)
    keep_content: Callable[[WireMessage], bool] = lambda m: False

    def frame(self, direction: str, payload: Union[str, bytes]) -> None:
        now = time.monotonic()
        self.last_frame = now
        decoded = decode_frame(payload)
        if decoded is None:
            return
        channel, header, parent, content = decoded
        msg = WireMessage(
            direction,
            channel,
            header.get("msg_type", ""),
            header.get("msg_id", ""),
            parent.get("msg_type", ""),
            parent.get("msg_id", ""),
            {},
            len(payload),
            now,
        )
        if direction == "out":
            if msg.msg_type == "execute_request":
                self.requests[msg.msg_id] = str(content.get("code", ""))
            elif msg.msg_type == "comm_msg":
                self.sent_comm[msg.msg_id] = _describe_comm(content)
        else:
            if msg.msg_type == "execute_reply":
                self.replies[msg.parent_id] = str(content.get("status", ""))
            elif msg.msg_type == "status" and channel == "iopub":
                self.kernel_state = str(content.get("execution_state", self.kernel_state))
                if self.kernel_state == "idle":
                    self.idle_for.add(msg.parent_id)
            elif msg.msg_type == "error":
                text = strip_ansi(
                    "\n".join(content.get("traceback") or [])
                    or f"{content.get('ename')}: {content.get('evalue')}"
                )
                self.problems.append(Problem("iopub error", self._where(msg), text))
            elif msg.msg_type == "stream" and content.get("name") == "stderr":
                self.problems.append(
                    Problem(
                        "iopub stderr", self._where(msg), strip_ansi(str(content.get("text", "")))
                    )
                )
            elif msg.msg_type in ("comm_msg", "comm_open"):
                data = content.get("data") if isinstance(content.get("data"), dict) else {}
                custom = data.get("content") if isinstance(data.get("content"), dict) else {}
                # plotly.js reaches the page in a custom message, or as the state of the one
                # model an explorer opens to have it parsed early (plot_view.warm_page).
                preload = ["preload"] in (data.get("buffer_paths") or [])
                msg.content = {
                    "comm_id": content.get("comm_id", ""),
                    "method": data.get("method", ""),
                    "custom_type": "plotly" if preload else custom.get("type", ""),
                }
        if self.keep_content(msg):
            msg.content = content
        self.messages.append(msg)

    def _where(self, msg: WireMessage) -> str:
        if msg.parent_type == "execute_request":
            code = self.requests.get(msg.parent_id, "")
            first = next((ln for ln in code.splitlines() if ln.strip()), "")
            return f"cell `{first[:80]}`"
        if msg.parent_type == "comm_msg":
            return f"widget callback (JupyterLab shows this only in its Log Console; page sent {self.sent_comm.get(msg.parent_id, 'a comm_msg')})"
        return f"kernel message with parent {msg.parent_type or 'none'}"

    def answered_since(self, first: int) -> bool:
        """True once the page sent a request or widget message after ``messages[first]`` and the
        kernel went idle after every such message (it finished handling them)."""
        sent = [
            m.msg_id
            for m in self.messages[first:]
            if m.direction == "out" and m.msg_type in ("execute_request", "comm_msg")
        ]
        return bool(sent) and all(mid in self.idle_for for mid in sent)

    def sent_since(self, first: int) -> list[str]:
        """What the page sent after ``messages[first]`` (requests and widget messages), each with
        whether the kernel went idle after it: for messages that say why a wait timed out."""
        return [
            f"{self.sent_comm.get(m.msg_id, 'a comm_msg') if m.msg_type == 'comm_msg' else 'an execute_request'}"
            f" ({'kernel idle after it' if m.msg_id in self.idle_for else 'no idle from the kernel after it'})"
            for m in self.messages[first:]
            if m.direction == "out" and m.msg_type in ("execute_request", "comm_msg")
        ]

    def pending(self) -> list[str]:
        """Execute requests the page sent that have no reply yet."""
        return [mid for mid in self.requests if mid not in self.replies]

    def comm_bytes(self, first: int = 0, last: Optional[int] = None) -> dict[str, int]:
        """Bytes of kernel -> page ``comm_open``/``comm_msg`` frames per widget model (comm id), for
        ``messages[first:last]``; the messages that carry plotly.js into the page are left out."""
        out: dict[str, int] = {}
        for m in self.messages[first:last]:
            if (
                m.direction == "in"
                and m.msg_type in ("comm_msg", "comm_open")
                and m.content.get("custom_type") != "plotly"
            ):
                cid = m.content.get("comm_id", "?")
                out[cid] = out.get(cid, 0) + m.size
        return out


def _describe_comm(content: dict) -> str:
    data = content.get("data") or {}
    state = data.get("state") if isinstance(data, dict) else None
    if isinstance(state, dict):
        short = {
            k: (
                v
                if isinstance(v, (int, float, bool)) or (isinstance(v, str) and len(v) < 60)
                else "..."
            )
            for k, v in list(state.items())[:4]
        }
        return f"a comm_msg {data.get('method', '')} {json.dumps(short)}"
    if isinstance(data, dict) and data.get("method") == "custom":
        return f"a custom comm_msg {json.dumps(data.get('content'))[:120]}"
    return "a comm_msg"


# -- the page --------------------------------------------------------------------------------

# JavaScript run in the page. Cells are numbered among all cells (0-based) and named by their
# first source line, which is what a person finds in the notebook.
_JS_CELL_NAME = """
  const textOf = (el) => {
    const spans = [...el.querySelectorAll('tspan')];
    return (spans.length ? spans.map((t) => t.textContent).join(' ') : el.textContent).replace(/\\s+/g, ' ').trim();
  };
  const cellName = (cell) => {
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
    const line = cell.querySelector('.jp-InputArea-editor .cm-line');
    return `cell ${cells.indexOf(cell)} \\`${(line ? line.textContent : '').trim().slice(0, 80)}\\``;
  };
"""

JS_PLOTS = (
    """() => {"""
    + _JS_CELL_NAME
    + """
  const out = [];
  document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell) => {
    cell.querySelectorAll('.jp-OutputArea-output').forEach((area) => {
      const widget = area.getAttribute('data-mime-type') === '"""
    + WIDGET_MIME
    + """' || !!area.querySelector('.jupyter-widgets');
      const cs = getComputedStyle(area);
      const areaWidth = area.clientWidth - parseFloat(cs.paddingLeft || 0) - parseFloat(cs.paddingRight || 0);
      const plots = area.matches('.js-plotly-plot') ? [area] : [...area.querySelectorAll('.js-plotly-plot')];
      plots.forEach((plot) => {
        if (!plot.checkVisibility()) return;
        const svgs = [...plot.querySelectorAll('svg.main-svg')];
        const drawn = Math.max(0, ...svgs.map((s) => s.getBoundingClientRect().width));
        const title = textOf(plot.querySelector('.gtitle') || document.createElement('i'));
        const headers = [...plot.querySelectorAll('.y-column')].map((col) =>
          [...col.querySelectorAll('.column-block#header .cell-text')].map(textOf).join(' ').trim());
        out.push({cell: cellName(cell), widget, title, headers: headers.slice(0, 8),
                  plotWidth: plot.getBoundingClientRect().width, drawnWidth: drawn, areaWidth});
      });
    });
  });
  return out;
}"""
)

JS_TABLES = (
    """() => {"""
    + _JS_CELL_NAME
    + """
  const out = [];
  document.querySelectorAll('.jp-Notebook .jp-Cell').forEach((cell) => {
    cell.querySelectorAll('.js-plotly-plot').forEach((plot) => {
      if (!plot.checkVisibility()) return;
      const title = textOf(plot.querySelector('.gtitle') || document.createElement('i'));
      plot.querySelectorAll('.table-control-view').forEach((table, ti) => {
        const columns = [...table.querySelectorAll('.y-column')].map((col) => ({
          header: [...col.querySelectorAll('.column-block#header .cell-text')].map(textOf).join(' ').trim(),
          cells: [...col.querySelectorAll('.column-block:not(#header) .cell-text')].map(textOf).filter((t) => t).length,
          rows: col.querySelectorAll('.column-block:not(#header) .column-cell').length,
        }));
        out.push({cell: cellName(cell), title, table: ti, columns});
      });
    });
  });
  return out;
}"""
)

JS_STDERR = (
    """() => {"""
    + _JS_CELL_NAME
    + """
  return [...document.querySelectorAll('.jp-Notebook .jp-Cell')].flatMap((cell) =>
    [...cell.querySelectorAll('[data-mime-type=\""""
    + STDERR_MIME
    + """\"]')].map((el) => ({cell: cellName(cell), text: el.textContent})));
}"""
)

JS_PROMPTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map((cell) => {
  const p = cell.querySelector('.jp-InputArea-prompt');
  const line = cell.querySelector('.jp-InputArea-editor .cm-line');
  return {prompt: p ? p.textContent.trim() : '', first: (line ? line.textContent : '').trim().slice(0, 80)};
})"""

# How many outputs each code cell's output area shows (one child per output of the cell's model).
JS_OUTPUT_COUNTS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell')].map((cell) =>
  cell.querySelectorAll(':scope .jp-OutputArea > .jp-OutputArea-child').length)"""

# Resolves after two animation frames: everything queued for drawing has been painted.
JS_TWO_FRAMES = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"

# The modal dialogs JupyterLab shows, as "title: text". A dialog keeps the keyboard focus and
# covers the page: key presses meant for the notebook go to its buttons.
JS_DIALOGS = """() => [...document.querySelectorAll('.jp-Dialog')].map((d) => {
  const part = (sel) => { const el = d.querySelector(sel); return el ? el.textContent : ''; };
  return (part('.jp-Dialog-header') + ': ' + part('.jp-Dialog-body')).replace(/\\s+/g, ' ').trim().slice(0, 300);
})"""

# What an element is, for messages: its tag, classes and (for a dialog's button) its text.
_JS_DESCRIBE = """
  const describe = (el) => {
    if (!el || el === document.body) return 'nothing (the page itself)';
    const cls = typeof el.className === 'string' ? el.className.trim().split(/\\s+/).filter((c) => c).slice(0, 3) : [];
    const text = el.tagName === 'BUTTON' ? ` '${el.textContent.trim().slice(0, 40)}'` : '';
    const dialog = el.closest('.jp-Dialog') ? ' in a JupyterLab dialog' : '';
    return el.tagName.toLowerCase() + cls.map((c) => '.' + c).join('') + text + dialog;
  };
"""

# A slider as its view shows it, read from its handle: the readout (the widget model's value),
# where noUiSlider holds the handle and its range, whether it is disabled, and what has the focus.
JS_SLIDER = (
    """(handle) => {"""
    + _JS_DESCRIBE
    + """
  const slider = handle.closest('.widget-slider');
  const target = handle.closest('.noUi-target');
  const readout = slider ? slider.querySelector('.widget-readout') : null;
  const num = (name) => parseFloat(handle.getAttribute(name));
  return {
    readout: readout ? readout.textContent.trim() : '',
    at: num('aria-valuenow'), min: num('aria-valuemin'), max: num('aria-valuemax'),
    disabled: !!(target && target.hasAttribute('disabled')),
    focused: document.activeElement === handle,
    focus: describe(document.activeElement),
  };
}"""
)

# Records, until read back with JS_KEYS_READ, where each key press of the page went (capture
# phase on window, so a press counts even when a handler stops it further down).
JS_KEYS_WATCH = (
    """(handle) => {"""
    + _JS_DESCRIBE
    + """
  const keys = [];
  const seen = (e) => keys.push({key: e.key, onHandle: e.target === handle, target: describe(e.target)});
  window.addEventListener('keydown', seen, true);
  window.__explorerKeys = () => { window.removeEventListener('keydown', seen, true); return keys; };
}"""
)
JS_KEYS_READ = "() => window.__explorerKeys ? window.__explorerKeys() : []"


class NotebookPage:
    """One notebook open in JupyterLab, with its websocket, console and page errors recorded."""

    def __init__(self, page: Any, lab: Lab, notebook: str) -> None:
        self.page = page
        self.lab = lab
        self.notebook = notebook
        self.wire = Wire()
        self.aborted: list[str] = []
        self.console_errors: list[Problem] = []
        self.page_errors: list[Problem] = []
        self._marks: Optional[tuple[int, int, int]] = (
            None  # problem counts when Run All was first clicked
        )
        page.route("**/*", self._route)
        page.on("websocket", self._websocket)
        page.on("console", self._console)
        page.on(
            "pageerror",
            lambda exc: self.page_errors.append(Problem("pageerror", self.notebook, str(exc))),
        )

    # event handlers (run on Playwright's dispatch, i.e. during our calls into the page)
    def _route(self, route: Any) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlparse(url).hostname in LOOPBACK:
            route.continue_()
        else:
            self.aborted.append(url)
            route.abort()

    def _websocket(self, ws: Any) -> None:
        if "/api/kernels/" not in ws.url:
            return
        ws.on("framereceived", lambda payload: self.wire.frame("in", payload))
        ws.on("framesent", lambda payload: self.wire.frame("out", payload))

    def _console(self, msg: Any) -> None:
        if msg.type == "error":
            loc = msg.location or {}
            self.console_errors.append(Problem("console", str(loc.get("url", "")), msg.text))

    # navigation and running
    def open(self, timeout_s: float = 180) -> None:
        """Load the notebook and wait until its kernel reports Idle in the status bar."""
        self.page.goto(self.lab.url(self.notebook), timeout=timeout_s * 1000)
        self.page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=timeout_s * 1000)
        self.page.get_by_text(re.compile(r"\| Idle$")).first.wait_for(timeout=timeout_s * 1000)
        # JupyterLab's widget manager asks a fresh kernel for `jupyter.widget.control` before any
        # cell imported ipywidgets; the kernel's "No such comm" answers arrive now, before Run All.
        self.settle(time.monotonic() + timeout_s, quiet_s=1.0)

    def run_all(self, timeout_s: float = 600) -> None:
        """*Run → Run All Cells*; returns once every queued cell has its reply and the page is quiet."""
        before = len(self.wire.requests)
        if self._marks is None:
            self.mark()
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).first.click()
        self.page.locator('[data-command="runmenu:run-all"]').click()
        deadline = time.monotonic() + timeout_s
        self.wait_until(
            lambda: len(self.wire.requests) > before, deadline, "Run All to send its first cell"
        )
        self.wait_kernel_done(deadline, "Run All")

    def save(self, timeout_s: float = 120) -> Any:
        """*File → Save Notebook*; the notebook as the page saved it (an nbformat node).

        The Lab serves a copy (``lab.root``), so this never touches the committed file. Returns
        once the file on disk was written after the click and holds every execution count the
        page shows and as many outputs per cell as the page shows: the outputs JupyterLab held
        then, as a reader of the file sees them. Autosave is off (:func:`write_settings`), so the
        click's save is the only writer; a dialog the save opened fails it.
        """
        import nbformat

        path = self.lab.root / self.notebook
        shown = [_count(p["prompt"]) for p in self.prompts()]
        outputs = self.page.evaluate(JS_OUTPUT_COUNTS)
        clicked = time.time() - 0.01  # the file system's clock, a little before the click
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^File$")).first.click()
        # the menu's item (the notebook's toolbar has a save button with the same command)
        self.page.locator('.lm-Menu [data-command="docmanager:save"]').first.click()
        saved: dict = {}

        def written() -> bool:
            try:
                if path.stat().st_mtime < clicked:
                    return False
                saved["text"] = path.read_text()
                cells = json.loads(saved["text"])["cells"]
            except (OSError, ValueError, KeyError):  # not yet there, or being replaced
                return False
            code = [c for c in cells if c["cell_type"] == "code"]
            saved["counts"] = (
                [c["execution_count"] for c in code],
                [len(c["outputs"]) for c in code],
            )
            return saved["counts"] == (shown, outputs)

        try:
            self.wait_until(
                written,
                time.monotonic() + timeout_s,
                f"the saved file to hold the page's execution counts {shown} and output "
                f"counts {outputs}",
                250,
            )
        except AssertionError as exc:
            on_disk = saved.get("counts", "nothing written since the click")
            raise AssertionError(f"{exc}; on disk: {on_disk}") from None
        dialogs = self.dialogs()
        if dialogs:  # e.g. "File Changed": it would take every later key press
            raise AssertionError(f"{self.notebook}: saving opened a dialog: {dialogs}")
        return nbformat.reads(saved["text"], as_version=4)

    def mark(self) -> None:
        """Count problems from now on (:meth:`run_all` marks itself the first time)."""
        self._marks = (len(self.wire.problems), len(self.page_errors), len(self.console_errors))

    def wait_until(
        self, condition: Callable[[], bool], deadline: float, what: str, poll_ms: int = 200
    ) -> None:
        """Poll ``condition`` (while Playwright keeps delivering events) until it holds or ``deadline`` passes."""
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.notebook}: timed out waiting for {what}; {self.state()}"
                )
            self.page.wait_for_timeout(poll_ms)

    def wait_kernel_done(self, deadline: float, what: str, quiet_s: float = 1.0) -> None:
        """Every execute request answered, kernel idle, no ``[*]`` prompt, and no frame for ``quiet_s``."""

        def done() -> bool:
            if self.wire.pending() or self.wire.kernel_state != "idle":
                return False
            if any(p["prompt"] == "[*]:" for p in self.prompts()):
                return False
            return time.monotonic() - self.wire.last_frame >= quiet_s

        self.wait_until(
            done, deadline, f"{what} to finish (kernel idle, every cell answered)", poll_ms=300
        )
        self.settle(deadline)

    def settle(self, deadline: Optional[float] = None, quiet_s: float = 0.5) -> None:
        """Wait until no websocket frame arrived for ``quiet_s``, then for two animation frames."""
        deadline = deadline or time.monotonic() + 120
        self.wait_until(
            lambda: time.monotonic() - self.wire.last_frame >= quiet_s,
            deadline,
            "the websocket to go quiet",
            100,
        )
        self.page.evaluate(JS_TWO_FRAMES)

    def state(self) -> str:
        prompts = self.prompts()
        dialogs = self.dialogs()
        return (
            f"kernel {self.wire.kernel_state}, {len(self.wire.pending())} request(s) unanswered, "
            f"prompts {[p['prompt'] for p in prompts]}"
            + (f"; JupyterLab shows a dialog: {dialogs}" if dialogs else "")
        )

    def dialogs(self) -> list[str]:
        """The modal dialogs the page shows ("title: text"); each holds the keyboard focus."""
        return self.page.evaluate(JS_DIALOGS)

    # what the page shows
    def prompts(self) -> list[dict]:
        return self.page.evaluate(JS_PROMPTS)

    def unexecuted_cells(self) -> list[str]:
        return [
            f"{p['prompt'] or '[ ]:'} `{p['first']}`"
            for p in self.prompts()
            if not re.fullmatch(r"\[\d+\]:", p["prompt"]) and p["first"]
        ]

    def plots(self) -> list[dict]:
        return self.page.evaluate(JS_PLOTS)

    def tables(self) -> list[dict]:
        return self.page.evaluate(JS_TABLES)

    def stderr_outputs(self) -> list[dict]:
        return self.page.evaluate(JS_STDERR)

    def problems(self) -> list[Problem]:
        """Since Run All: iopub errors/stderr (cells and widget callbacks), page errors, console errors."""
        w, p, c = self._marks or (0, 0, 0)
        return [*self.wire.problems[w:], *self.page_errors[p:], *self.console_errors[c:]]

    def problems_at_open(self) -> list[Problem]:
        """What arrived while the notebook opened, before Run All (JupyterLab's own start-up)."""
        w, p, c = self._marks or (
            len(self.wire.problems),
            len(self.page_errors),
            len(self.console_errors),
        )
        return [*self.wire.problems[:w], *self.page_errors[:p], *self.console_errors[:c]]

    def output_of(self, code: str) -> Any:
        """The output area of the (last) cell whose source contains ``code``."""
        cell = self.page.locator(
            ".jp-Notebook .jp-CodeCell",
            has=self.page.locator(".jp-InputArea-editor", has_text=code),
        ).last
        return cell.locator(".jp-OutputArea")

    def screenshot(self, path: Path, target: Any = None) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if target is not None and target.count():
                target.scroll_into_view_if_needed(timeout=30_000)
            else:  # what is there instead (an error, an empty output): the last cell
                self.page.locator(".jp-Notebook .jp-Cell").last.scroll_into_view_if_needed(
                    timeout=30_000
                )
        except Exception:
            pass  # a screenshot of whatever is in view still helps
        self.page.screenshot(path=str(path))
        return path


def _count(prompt: str) -> Optional[int]:
    """The execution count a prompt shows (``[3]:`` -> 3); None for ``[ ]:``, ``[*]:`` or none."""
    found = re.fullmatch(r"\[(\d+)\]:", prompt)
    return int(found.group(1)) if found else None


# -- checks shared by the tests ----------------------------------------------------------------


def narrow_widget_plots(plots: list[dict], share: float = 0.9) -> list[dict]:
    """Figures inside widget outputs drawn narrower than ``share`` of their output area."""
    return [
        p
        for p in plots
        if p["widget"]
        and p["areaWidth"] > 0
        and min(p["plotWidth"], p["drawnWidth"]) < share * p["areaWidth"]
    ]


def describe_plot(p: dict) -> str:
    name = (
        f"'{p['title']}'"
        if p["title"]
        else (f"untitled figure with headers {p['headers']}" if p["headers"] else "untitled figure")
    )
    return (
        f"{p['cell']}: {name} drawn {p['drawnWidth']:.0f} px wide (plot element {p['plotWidth']:.0f} px) "
        f"in an output area {p['areaWidth']:.0f} px wide ({p['drawnWidth'] / max(p['areaWidth'], 1):.0%})"
    )


def empty_table_columns(tables: list[dict]) -> list[str]:
    """One line per table column with an empty header or without any non-empty cell text."""
    out = []
    for t in tables:
        name = f"'{t['title']}'" if t["title"] else f"untitled table {t['table']}"
        headers = [c["header"] for c in t["columns"]]
        if not t["columns"]:
            out.append(f"{t['cell']}: {name} has no columns at all")
        for i, c in enumerate(t["columns"]):
            label = f"column {i} ('{c['header']}')" if c["header"] else f"column {i}"
            if not c["header"]:
                out.append(f"{t['cell']}: {name} {label} has an empty header (headers: {headers})")
            if c["cells"] == 0:
                out.append(
                    f"{t['cell']}: {name} {label} has no text in any of its {c['rows']} drawn cell(s) (headers: {headers})"
                )
    return out


# -- driving ipywidgets the way a person does --------------------------------------------------


#: Keys that move a slider's handle up (right) or down (left), as noUiSlider reads them.
KEYS_UP = ("ArrowRight", "ArrowUp", "PageUp", "End")
KEYS_DOWN = ("ArrowLeft", "ArrowDown", "PageDown", "Home")

# A <select> as the page shows it: the chosen index, its options (value, label), disabled.
JS_SELECT = """(s) => ({index: s.selectedIndex, disabled: s.disabled,
  options: [...s.options].map((o) => [o.value, o.label])})"""


def slider_problem(state: dict, key: str) -> Optional[str]:
    """Why ``key`` cannot move a slider in ``state`` (see ``JS_SLIDER``), or None when it can."""
    if state["disabled"]:
        return "it is disabled"
    try:
        shown = float(state["readout"])
    except ValueError:
        shown = None
    if shown is not None and abs(shown - state["at"]) > 0.05:  # aria-valuenow has 1 decimal
        return f"its readout says {state['readout']} but its handle is at {state['at']:g}"
    if key in KEYS_UP and state["at"] >= state["max"]:
        return f"it is at its maximum {state['max']:g} already"
    if key in KEYS_DOWN and state["at"] <= state["min"]:
        return f"it is at its minimum {state['min']:g} already"
    return None


def option_to_choose(shown: dict, value: str) -> tuple[int, Optional[str]]:
    """The index of the option ``value`` (its value or label) in a ``<select>`` as ``JS_SELECT``
    reads it, and why choosing it would change nothing (None when it would)."""
    labels = [text for _, text in shown["options"]]
    index = next(
        (i for i, (v, text) in enumerate(shown["options"]) if value in (v, text.strip())), -1
    )
    if shown["disabled"]:
        return index, "it is disabled"
    if index < 0:
        return index, f"it offers no such option (options: {labels})"
    if index == shown["index"]:
        return index, "it shows that already; choosing it again changes nothing"
    return index, None


class Explorer:
    """The live widget a cell shows, found by a snippet of that cell's source, and its controls.

    Controls are found by their visible label, so a test reads like what a person does:
    ``app.dropdown("schedule").select_option("gpipe")``.
    """

    def __init__(self, nb: NotebookPage, code: str) -> None:
        self.nb = nb
        self.page = nb.page
        self.code = code
        out = nb.output_of(code)
        self.root = out.locator(
            ".jp-OutputArea-output", has=self.page.locator(".jupyter-widgets")
        ).last

    def _labelled(self, kind: str, label: str) -> Any:
        exact = re.compile(rf"^\s*{re.escape(label)}\s*$")
        return self.root.locator(
            f".widget-{kind}", has=self.page.locator(".widget-label", has_text=exact)
        ).first

    def dropdown(self, label: str) -> Any:
        return self._labelled("dropdown", label).locator("select")

    def slider_handle(self, label: str) -> Any:
        return self._labelled("slider", label).locator(".noUi-handle")

    def slider_readout(self, label: str) -> Any:
        return self._labelled("slider", label).locator(".widget-readout")

    def checkbox(self, text: str) -> Any:
        return (
            self.root.locator(".widget-checkbox", has_text=text)
            .locator("input[type=checkbox]")
            .first
        )

    def button(self, text: str) -> Any:
        return self.root.locator(
            "button.jupyter-button", has_text=re.compile(rf"^\s*{re.escape(text)}\b")
        ).first

    def findings(self) -> Any:
        """The findings list (an ipywidgets ``Select``)."""
        return self.root.locator(".widget-select select").first

    def plot(self, title_part: str) -> Any:
        return self.root.locator(
            ".js-plotly-plot", has=self.page.locator(".gtitle", has_text=title_part)
        ).first

    def texts(self) -> str:
        """Every HTML line of the explorer (status, headers, progress), as the page shows them."""
        return "\n".join(
            t.strip() for t in self.root.locator(".widget-html-content").all_inner_texts()
        )

    def act(
        self, what: str, action: Callable[[], None], timeout_s: float = 120, quiet_s: float = 0.7
    ) -> None:
        """Do ``action`` and wait until the kernel answered it, went idle and the page went quiet.

        Fails at once while a JupyterLab dialog is open (it, not the explorer, would take the
        action); a timeout says what the page sent and which of it the kernel answered.
        """
        self._no_dialog(what)
        start = len(self.nb.wire.messages)
        action()
        self._await_kernel(what, start, time.monotonic() + timeout_s, quiet_s)

    def _no_dialog(self, what: str) -> None:
        dialogs = self.nb.dialogs()
        if dialogs:
            raise AssertionError(
                f"{self.nb.notebook}: cannot do '{what}': JupyterLab shows a dialog, which holds "
                f"the keyboard focus and covers the page: {dialogs}"
            )

    def _await_kernel(self, what: str, start: int, deadline: float, quiet_s: float = 0.7) -> None:
        """Wait until the page sent something since ``messages[start]``, the kernel went idle after
        each message and no frame came for ``quiet_s``; then for two animation frames."""
        wire = self.nb.wire
        try:
            self.nb.wait_until(
                lambda: (
                    wire.answered_since(start) and time.monotonic() - wire.last_frame >= quiet_s
                ),
                deadline,
                f"the kernel to handle: {what}",
                150,
            )
        except AssertionError as exc:
            sent = wire.sent_since(start)
            raise AssertionError(
                f"{exc}; since then the page sent {'; '.join(sent) if sent else 'nothing'}"
            ) from None
        self.page.evaluate(JS_TWO_FRAMES)

    def move_slider(
        self, label: str, key: str = "ArrowRight", times: int = 1, timeout_s: float = 120
    ) -> None:
        """Press ``key`` ``times`` times on the slider's handle, as a person does with the keyboard.

        A press reaches the kernel only when it moves the slider: its handle must hold the
        keyboard focus (a JupyterLab dialog takes it), and the slider must be enabled, its
        handle where its readout says, and not already at the end the key pushes towards. So
        the press waits until the slider can move (or fails at once, saying why, when nothing
        on its way from the kernel could change that), focuses the handle and checks that it
        keeps the focus; afterwards every key must have landed on the handle and the readout
        must have moved, and only then does it wait for the kernel to handle the new value.
        """
        what = f"slider '{label}' {key} x{times}"
        handle = self.slider_handle(label)
        handle.scroll_into_view_if_needed()
        self._no_dialog(what)
        deadline = time.monotonic() + timeout_s
        before = self._slider_can_move(handle, what, key, deadline)
        handle.focus()
        self.page.evaluate(JS_TWO_FRAMES)
        focused = handle.evaluate(JS_SLIDER)
        if not focused["focused"]:
            raise AssertionError(
                f"{self.nb.notebook}: {what}: the handle does not keep the keyboard focus; "
                f"{focused['focus']} has it"
            )
        start = len(self.nb.wire.messages)
        handle.evaluate(JS_KEYS_WATCH)
        for _ in range(times):
            handle.press(key)
        keys = self.page.evaluate(JS_KEYS_READ)
        after = handle.evaluate(JS_SLIDER)
        astray = [k["target"] for k in keys if not k["onHandle"]]
        if astray or len(keys) != times:
            raise AssertionError(
                f"{self.nb.notebook}: {what}: {len(keys)} key press(es) seen by the page, "
                f"{len(astray)} of them went to {astray} instead of the slider's handle"
            )
        if after["readout"] == before["readout"]:
            raise AssertionError(
                f"{self.nb.notebook}: {what}: the keys reached the handle but the readout still "
                f"says {before['readout']} (handle at {after['at']:g}, range "
                f"{after['min']:g}..{after['max']:g}, disabled: {after['disabled']})"
            )
        self._await_kernel(what, start, deadline)

    def _slider_can_move(self, handle: Any, what: str, key: str, deadline: float) -> dict:
        """The slider's state once ``key`` can move it; raises at once when it cannot and the
        kernel is idle with nothing on its way (no message could change that)."""
        wire = self.nb.wire
        seen: dict = {}

        def can_move() -> bool:
            state = seen["state"] = handle.evaluate(JS_SLIDER)
            problem = slider_problem(state, key)
            if problem is None:
                return True
            quiet = time.monotonic() - wire.last_frame >= 0.7
            if wire.kernel_state == "idle" and not wire.pending() and quiet:
                raise AssertionError(
                    f"{self.nb.notebook}: {what} cannot move the slider: {problem} (kernel idle, "
                    "nothing on its way that could change that)"
                )
            return False

        try:
            self.nb.wait_until(can_move, deadline, f"the slider to be movable for {what}", 150)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; {slider_problem(seen['state'], key)}") from None
        return seen["state"]

    def type_slider(self, label: str, value: int, timeout_s: float = 120) -> None:
        """Type ``value`` into the slider's text box and press Enter (as a person who knows the number).

        Only a new value reaches the kernel: typing what the slider shows, or into a disabled
        slider, fails at once; afterwards the readout must show the typed value's effect before
        the kernel is waited for.
        """
        what = f"slider '{label}' typed {value}"
        readout = self.slider_readout(label)
        readout.scroll_into_view_if_needed()
        self._no_dialog(what)
        shown = readout.inner_text().strip()
        if readout.get_attribute("contenteditable") != "true":
            raise AssertionError(
                f"{self.nb.notebook}: {what}: the slider is disabled (its box cannot be typed into)"
            )
        if shown == str(value):
            raise AssertionError(
                f"{self.nb.notebook}: {what}: the slider already shows {value}; typing it again "
                "changes nothing, so nothing would reach the kernel"
            )
        start = len(self.nb.wire.messages)
        readout.click()
        self.page.keyboard.press("Control+A")
        self.page.keyboard.type(str(value))
        readout.press("Enter")
        if readout.inner_text().strip() == shown:
            raise AssertionError(
                f"{self.nb.notebook}: {what}: after Enter the box still shows {shown} (the value "
                "is outside the slider's range, or the typing went elsewhere)"
            )
        self._await_kernel(what, start, time.monotonic() + timeout_s)

    def select(self, label: str, value: str, timeout_s: float = 120) -> None:
        """Choose ``value`` (an option's value or label) in the dropdown ``label``.

        Only a change reaches the kernel: a disabled dropdown, a missing option or the option
        already chosen fails at once, naming what the dropdown offers.
        """
        what = f"dropdown '{label}' -> {value}"
        dd = self.dropdown(label)
        dd.scroll_into_view_if_needed()
        self._no_dialog(what)
        index, problem = option_to_choose(dd.evaluate(JS_SELECT), value)
        if problem:
            raise AssertionError(f"{self.nb.notebook}: {what}: {problem}")
        start = len(self.nb.wire.messages)
        dd.select_option(value)
        chosen = dd.evaluate(JS_SELECT)["index"]
        if chosen != index:
            raise AssertionError(
                f"{self.nb.notebook}: {what}: the dropdown shows option {chosen}, not {index}"
            )
        self._await_kernel(what, start, time.monotonic() + timeout_s)

    def click_finding(self, index: int = 0, timeout_s: float = 120) -> str:
        """Click the ``index``-th line of the findings list; returns its text."""
        lst = self.findings()
        lst.scroll_into_view_if_needed()
        option = lst.locator("option").nth(index)
        text = option.inner_text()
        self.act(f"finding {index} clicked ({text[:60]})", lambda: option.click(), timeout_s)
        return text
