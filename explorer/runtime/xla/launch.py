"""Start the child, follow its messages, and collect what it and torch_xla wrote.

The parent never imports torch_xla. It sets the capture variables (read once per process,
so they must be in the child's environment from the start), reads the child's stdout line by
line so a caller can show per-step progress, enforces a timeout (collectives across CPU
devices deadlock rather than fail), and turns any ending other than "done" into a
:class:`Failure` that keeps the steps recorded so far.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Optional

from explorer.errors import InputError
from explorer.runtime.xla.config import RunConfig
from explorer.traces.xla import failure as failures
from explorer.traces.xla.protocol import decode
from explorer.traces.xla.records import DEBUG_FILE, DUMP_DIR, SAVE_FILE, ChildResult, Failure

Progress = Callable[[dict[str, Any]], None]

CONFIG_FILE, STDERR_FILE = "config.json", "stderr.txt"


def child_env(cfg: RunConfig, out_dir: str) -> dict[str, str]:
    """The child's environment: the PJRT device plus, with capture, torch_xla's debug outputs."""
    env = dict(os.environ)
    for key in (
        "PT_XLA_DEBUG_LEVEL",
        "PT_XLA_DEBUG_FILE",
        "XLA_SAVE_TENSORS_FILE",
        "XLA_IR_DEBUG",
        "XLA_HLO_DEBUG",
    ):
        env.pop(key, None)
    env["PJRT_DEVICE"] = cfg.pjrt_device
    if cfg.fsdp == "v2" and cfg.pjrt_device == "CPU":
        env["CPU_NUM_DEVICES"] = str(cfg.virtual_devices)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith("--xla_dump")]
    if cfg.capture:
        env.update(PT_XLA_DEBUG_LEVEL="2", PT_XLA_DEBUG_FILE=os.path.join(out_dir, DEBUG_FILE))
        if cfg.source_lines:
            env.update(XLA_IR_DEBUG="1", XLA_HLO_DEBUG="1")
        if cfg.save_tensors:
            env.update(
                XLA_SAVE_TENSORS_FILE=os.path.join(out_dir, SAVE_FILE), XLA_SAVE_TENSORS_FMT="hlo"
            )
        flags += [
            f"--xla_dump_to={os.path.join(out_dir, DUMP_DIR)}",
            "--xla_dump_hlo_module_re=SyncTensorsGraph",
        ]
    env["XLA_FLAGS"] = " ".join(flags)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def launch(
    cfg: RunConfig, out_dir: Optional[str] = None, progress: Optional[Progress] = None
) -> ChildResult:
    """Run ``cfg`` (already :meth:`~RunConfig.resolved`) in a child process and wait for it."""
    out_dir = out_dir or tempfile.mkdtemp(prefix="explorer-xla-")
    os.makedirs(out_dir, exist_ok=True)
    for stale in (DEBUG_FILE,):
        if os.path.exists(os.path.join(out_dir, stale)):
            os.remove(os.path.join(out_dir, stale))
    config_path = os.path.join(out_dir, CONFIG_FILE)
    with open(config_path, "w", encoding="utf-8") as fh:
        fh.write(cfg.to_json())
    result = ChildResult(out_dir)
    stderr_path = os.path.join(out_dir, STDERR_FILE)
    with open(stderr_path, "w+", encoding="utf-8", errors="replace") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "explorer.runtime.xla.child", config_path],
            stdout=subprocess.PIPE,
            stderr=err,
            env=child_env(cfg, out_dir),
            text=True,
            errors="replace",
            start_new_session=True,
        )
        timer = threading.Timer(cfg.timeout_s, _kill, (proc,))
        timer.start()
        other: list[str] = []
        try:
            for line in proc.stdout:  # type: ignore[union-attr]
                msg = decode(line)
                if msg is None:
                    if line.strip():
                        other.append(line.rstrip("\n"))
                    continue
                result.messages.append(msg)
                if progress is not None:
                    progress(msg)
            returncode = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                _kill(proc)
                proc.wait()
            timed_out = proc.pid in _KILLED
            _KILLED.discard(proc.pid)
        err.seek(0)
        stderr = err.read()
    result.output = "\n".join(other[-200:])
    several = cfg.fsdp == "v2" and cfg.virtual_devices > 1  # only then can CPU collectives deadlock
    result.failure = _ending(result.messages, returncode, stderr, timed_out, cfg.timeout_s, several)
    return result


_KILLED: set[int] = set()


def _kill(proc: subprocess.Popen) -> None:
    """Timeout: kill the child's whole session (it may have started helper threads or processes)."""
    _KILLED.add(proc.pid)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _running_step(messages: list[dict[str, Any]]) -> Optional[int]:
    begun = [m["step"] for m in messages if m["event"] == "begin"]
    done = {m["step"] for m in messages if m["event"] == "step"}
    return begun[-1] if begun and begun[-1] not in done else None


def _ending(
    messages: list[dict[str, Any]],
    returncode: int,
    stderr: str,
    timed_out: bool,
    timeout_s: float,
    several_devices: bool = False,
) -> Optional[Failure]:
    events = {m["event"]: m for m in messages}
    step = _running_step(messages)
    if "input_error" in events:
        raise InputError(events["input_error"]["message"])
    if timed_out:
        where = f"step {step}" if step is not None else "setup"
        why = (
            "; collectives across several CPU devices deadlock upstream"
            if several_devices
            else "; the step itself did not finish: a loop, a sleep, or a step too large for the timeout"
        )
        return Failure(
            "timeout",
            f"no result after {timeout_s:g} s (stopped during {where}{why})",
            step,
            returncode,
            failures.signal_name(returncode),
            failures.tail(stderr),
        )
    if "error" in events:
        return Failure(
            "exception",
            events["error"]["message"],
            step,
            returncode,
            None,
            failures.tail(events["error"].get("traceback", "") or stderr),
        )
    if "done" in events and returncode == 0:
        return None
    return failures.from_exit(returncode, stderr, step)
