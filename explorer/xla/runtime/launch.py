"""Start the child, follow its messages, and collect what it and torch_xla wrote.

The parent never imports torch_xla. It sets the capture variables (read once per process,
so they must be in the child's environment from the start) and hands the child to the
supervisor (:mod:`explorer.processes`) as :class:`XlaEngine`: the child's stdout is read
line by line so a caller can show per-step progress, a timeout ends the child's whole process
group (collectives across CPU devices deadlock rather than fail), and any ending other than
"done" becomes a :class:`Failure` that keeps the steps recorded so far.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from explorer.errors import InputError
from explorer.failure import Failure, FailureKind, signal_name, tail
from explorer.folder_lock import FolderLock, new_run_id
from explorer.processes import Child, Engine, Report, supervise
from explorer.xla.runtime.config import RunConfig, refuse_xla_cuda
from explorer.xla.traces import failure as failures
from explorer.xla.traces.protocol import decode
from explorer.xla.traces.records import (
    CONFIG_FILE,
    DEBUG_FILE,
    DUMP_DIR,
    MESSAGES_FILE,
    METRICS_FILE,
    PREVIOUS_DIR,
    RUN_FILE,
    SAVE_FILE,
    ChildResult,
)

Progress = Callable[[dict[str, Any]], None]

STDERR_FILE = "stderr.txt"


#: LLVM's optimization level for XLA:CPU's generated code. What the explorer shows (the graphs,
#: their HLO before optimization, why each one compiled) is decided before code generation; at the
#: explorer's model sizes LLVM's optimizations cost more CPU than the steps they speed up (a
#: 6-step ``logging`` run: 11.9 s of CPU at XLA's default level 3, 8.3 s at 0, each cached step
#: 0.25 ms slower: ``benchmarks/bench_xla_codegen.py``), so XLA:CPU runs at 0. The graph hash
#: torch_xla prints covers ``XLA_FLAGS``, so it differs between levels.
CPU_CODEGEN_LEVEL = "--xla_backend_optimization_level"


def cpu_codegen_flags(pjrt_device: str, flags: list[str]) -> list[str]:
    """What XLA:CPU adds to the user's ``XLA_FLAGS``: the cheaper code generation, unless the
    user chose a level (theirs wins) or the device is not the CPU (a TPU is left as it is)."""
    if pjrt_device != "CPU" or any(f.startswith(CPU_CODEGEN_LEVEL) for f in flags):
        return []
    return [f"{CPU_CODEGEN_LEVEL}=0"]


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
    flags += cpu_codegen_flags(cfg.pjrt_device, flags)
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


class XlaEngine(Engine):
    """The XLA child on the supervisor: one process, its reports marked lines on stdout."""

    def __init__(self, cfg: RunConfig, out_dir: str, config_path: str) -> None:
        self.cfg, self.out_dir, self.config_path = cfg, out_dir, config_path
        self.messages: list[dict[str, Any]] = []

    def children(self) -> list[Child]:
        return [
            Child(
                0,
                [sys.executable, "-m", "explorer.xla.runtime.child", self.config_path],
                child_env(self.cfg, self.out_dir),
                Path(self.out_dir) / STDERR_FILE,
                pipe_stdout=True,
            )
        ]

    def read_line(self, rank: int, line: str) -> Optional[Report]:
        msg = decode(line)
        if msg is None:
            return None
        self.messages.append(msg)
        # kept as it arrives: a run stopped at step 3 leaves the markers of its steps 0-2
        with open(Path(self.out_dir) / MESSAGES_FILE, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(msg) + "\n")
        return Report(rank, str(msg["event"]), msg)


def launch(
    cfg: RunConfig,
    out_dir: Optional[str] = None,
    progress: Optional[Progress] = None,
    claimed: bool = False,
) -> ChildResult:
    """Run ``cfg`` (already :meth:`~RunConfig.resolved`) in a child process and wait for it.

    The folder is claimed for the run (:func:`claim_folder`) unless the caller ``claimed`` it
    already, to hold it on while it writes what it makes of the run (``xla-run``'s ``run.json``).
    """
    refuse_xla_cuda(cfg.pjrt_device)  # also for a config that skipped resolved()
    out_dir = out_dir or tempfile.mkdtemp(prefix="explorer-xla-")
    lock = None if claimed else claim_folder(out_dir)
    try:
        return _launch(cfg, out_dir, progress)
    finally:
        if lock is not None:
            lock.release()


def claim_folder(out_dir: str) -> FolderLock:
    """``out_dir``, created and locked for one run (:mod:`explorer.folder_lock`): two runs started
    into one folder once set each other's files aside and wrote into one message log, and the
    mix read as one clean run. A second run is refused while the first holds it."""
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--out {out_dir}: the folder cannot be created ({exc.strerror or exc}); give a "
            "folder you can write"
        ) from None
    return FolderLock.claim(Path(out_dir), new_run_id())


def _launch(cfg: RunConfig, out_dir: str, progress: Optional[Progress]) -> ChildResult:
    set_aside_earlier_run(out_dir)
    config_path = os.path.join(out_dir, CONFIG_FILE)
    with open(config_path, "w", encoding="utf-8") as fh:
        fh.write(cfg.to_json())
    engine = XlaEngine(cfg, out_dir, config_path)

    def on_report(new: list[Report]) -> None:
        if progress is not None:
            for report in new:
                progress(dict(report.data))

    out = supervise(engine, on_report=on_report, timeout_s=cfg.timeout_s)
    stderr = (Path(out_dir) / STDERR_FILE).read_text(encoding="utf-8", errors="replace")
    result = ChildResult(out_dir, messages=engine.messages)
    result.output = "\n".join(out.output.get(0, [])[-200:])
    several = cfg.fsdp == "v2" and cfg.virtual_devices > 1  # only then can CPU collectives deadlock
    result.failure = _ending(
        result.messages,
        out.returncodes[0],
        stderr,
        out.ending == "timeout",
        cfg.timeout_s,
        several,
    )
    return result


def set_aside_earlier_run(out_dir: str) -> Optional[str]:
    """Move what an earlier run left in ``out_dir`` to ``previous/<n>/`` (returned), so that
    nothing this run reads or a later ``explorer read`` finds is another run's: its HLO dumps
    were once paired with this run's compiles, and its save file read as this run's."""
    names = [DEBUG_FILE, DUMP_DIR, METRICS_FILE, STDERR_FILE, CONFIG_FILE, RUN_FILE, MESSAGES_FILE]
    found = [n for n in names if os.path.lexists(os.path.join(out_dir, n))]
    found += sorted(n for n in os.listdir(out_dir) if n.startswith(SAVE_FILE))
    if not found:
        return None
    previous = os.path.join(out_dir, PREVIOUS_DIR)
    if os.path.lexists(previous) and not os.path.isdir(previous):
        raise InputError(
            f"{previous} is not a folder, so an earlier run in {out_dir} cannot be set aside "
            "there: move it away, or give another --out folder"
        )
    os.makedirs(previous, exist_ok=True)
    n = 1 + sum(1 for d in os.listdir(previous) if d.isdigit())
    while os.path.exists(os.path.join(previous, str(n))):
        n += 1
    target = os.path.join(previous, str(n))
    os.makedirs(target)
    for name in found:
        os.replace(os.path.join(out_dir, name), os.path.join(target, name))
    _repoint_record(target, out_dir)
    return target


def _repoint_record(target: str, out_dir: str) -> None:
    """Make the set-aside ``run.json``'s ``hlo_path``s name the dumps where they now lie: they
    named ``out_dir``'s dump folder, where the next run writes modules of the same names."""
    record = os.path.join(target, RUN_FILE)
    try:
        with open(record, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return  # none, or not xla-run's: nothing to repoint
    old = os.path.join(out_dir, DUMP_DIR) + os.sep
    new = os.path.join(target, DUMP_DIR) + os.sep

    def moved(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: new + v[len(old) :]
                if k == "hlo_path" and isinstance(v, str) and v.startswith(old)
                else moved(v)
                for k, v in value.items()
            }
        return [moved(v) for v in value] if isinstance(value, list) else value

    with open(record, "w", encoding="utf-8") as fh:
        json.dump(moved(doc), fh, indent=1)


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
            FailureKind.TIMEOUT,
            f"no result after {timeout_s:g} s (stopped during {where}{why})",
            step=step,
            returncode=returncode,
            signal=signal_name(returncode),
            traceback_tail=tail(stderr),
        )
    if "error" in events:
        error = events["error"]
        return Failure(
            FailureKind.EXCEPTION,
            error["message"],
            step=step,
            exception_type=error.get("type"),
            returncode=returncode,
            traceback_tail=tail(error.get("traceback", "") or stderr),
        )
    if "done" in events and returncode == 0:
        return None
    return failures.from_exit(returncode, stderr, step)


__all__ = ["CPU_CODEGEN_LEVEL", "Progress", "child_env", "cpu_codegen_flags", "XlaEngine", "launch"]
