"""The child process: ``python -m explorer.xla.runtime.child CONFIG.json``.

This is the only module that imports torch_xla at run time, and it only runs in a process of
its own: torch_xla reads its debug variables once per process and aborts the whole process on
some internal errors. Per step it costs two reads of each compile counter, two clock reads,
one ``stat`` of the debug file and one message line; the debug blocks and HLO dumps that
torch_xla writes itself are read by the parent after the run.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any, Callable, Optional

from explorer.errors import InputError
from explorer.gcpause import frozen_imports
from explorer.xla.runtime.config import RunConfig
from explorer.xla.traces.protocol import encode
from explorer.xla.traces.records import METRICS_FILE


def _emit(event: str, **fields: Any) -> None:
    sys.stdout.write(encode(event, **fields))
    sys.stdout.flush()


class _Counters:
    """Compile counters and time metrics read before and after a step."""

    def __init__(self) -> None:
        import torch_xla.debug.metrics as met

        self.met = met

    def read(self) -> tuple[int, int, float, float]:
        met = self.met
        compile_t = met.metric_data("CompileTime")
        execute_t = met.metric_data("ExecuteTime")
        return (
            met.counter_value("UncachedCompile") or 0,
            met.counter_value("CachedCompile") or 0,
            compile_t[1] if compile_t else 0.0,
            execute_t[1] if execute_t else 0.0,
        )


def _debug_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


class _LineSwitch:
    """Source lines on while graphs are new, off once the run has settled (see ``RunConfig``)."""

    def __init__(self, xlac: Any, settle: int, on: bool) -> None:
        self.xlac, self.settle, self.on, self.quiet = xlac, settle, on, 0

    def after_step(self, compiled: bool) -> None:
        if not self.settle:
            return
        self.quiet = 0 if compiled else self.quiet + 1
        if compiled and not self.on:
            self._set(True)
        elif self.on and self.quiet >= self.settle:
            self._set(False)

    def _set(self, on: bool) -> None:
        self.xlac._set_ir_debug(on)
        self.on = on


def _load_user_step(cfg: RunConfig) -> Optional[Callable[[int], Any]]:
    """The user's ``--step`` function, or None for a preset (built by ``steps.build`` once
    torch_xla is in)."""
    if not cfg.step:
        return None
    from explorer.user_step import load_step

    return load_step(cfg.step)


def run(cfg: RunConfig, out_dir: str = "") -> None:
    """Build the step, run ``cfg.steps`` steps with a sync after each, and report every step.

    With capture, torch_xla's metrics report is written to ``out_dir`` at the end, as a user's
    script would print it: one of the artifacts ``explorer read`` takes.
    """
    # The user's step is loaded before torch_xla, whose import takes seconds: a module that is
    # missing, does not parse or lacks the function is bad input said at once. The capture's
    # settings are in this process's environment already, so a module that imports torch_xla
    # itself gets the same capture.
    user_step = _load_user_step(cfg)
    with frozen_imports():  # a quarter of torch_xla's import is the collector (explorer.gcpause)
        import torch_xla
        import torch_xla.core.xla_model as xm
        import torch_xla.runtime as xr

    if cfg.fsdp == "v2" and not cfg.step:
        xr.use_spmd()
    from explorer.xla.runtime.steps import build

    debug_file = os.environ.get("PT_XLA_DEBUG_FILE", "")
    start = time.perf_counter()
    if user_step is not None:
        step_fn, info = user_step, {"wrapper": "the user's own step", "workarounds": []}
    else:
        step_fn, info = build(cfg)
    torch_xla.sync()
    xm.wait_device_ops()
    device = {
        "pjrt_device": xr.device_type(),
        "devices": xr.global_runtime_device_count(),
        "world_size": xr.world_size(),
        "spmd": bool(cfg.fsdp == "v2" and not cfg.step),
        "torch_xla": torch_xla.__version__,
        **info,
    }
    _emit(
        "setup",
        device=device,
        setup_ms=(time.perf_counter() - start) * 1e3,
        debug_offset=_debug_size(debug_file) if cfg.capture else 0,
    )
    counters = _Counters() if cfg.capture else None
    xla_device = str(torch_xla.device())
    lines = _LineSwitch(
        torch_xla._XLAC,
        cfg.lines_settle if cfg.capture and cfg.source_lines else 0,
        on=bool(cfg.capture and cfg.source_lines),
    )
    for i in range(cfg.steps):
        _emit("begin", step=i)
        before = counters.read() if counters else None
        t0 = time.perf_counter()
        step_fn(i)
        report = ""
        if cfg.live_report is not None:
            report = torch_xla._XLAC._xla_tensors_report(cfg.live_report, xla_device)
        torch_xla.sync()
        xm.wait_device_ops()
        wall = (time.perf_counter() - t0) * 1e3
        record: dict[str, Any] = {"step": i, "wall_ms": wall}
        if counters and before:
            after = counters.read()
            record.update(
                uncached=after[0] - before[0],
                cached=after[1] - before[1],
                compile_ms=(after[2] - before[2]) / 1e6,
                execute_ms=(after[3] - before[3]) / 1e6,
                debug_offset=_debug_size(debug_file),
                source_lines=lines.on,
            )
            lines.after_step(compiled=after[0] > before[0])
        if report:
            record["live_report"] = report
        _emit("step", **record)
    if cfg.capture and out_dir:
        import torch_xla.debug.metrics as met

        with open(os.path.join(out_dir, METRICS_FILE), "w", encoding="utf-8") as fh:
            fh.write(met.metrics_report())
    _emit("done")


def main(argv: Optional[list[str]] = None) -> int:
    """Run the config file named on the command line; report failures as messages too."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as fh:
        cfg = RunConfig.from_json(fh.read())
    try:
        run(cfg, os.path.dirname(os.path.abspath(argv[0])))
    except InputError as exc:
        _emit("input_error", message=str(exc))
        return 3
    except Exception as exc:  # the user's step or the model: report it, keep the steps so far
        _emit(
            "error",
            message=f"{type(exc).__name__}: {exc}",
            type=type(exc).__name__,
            traceback=traceback.format_exc(),
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["run", "main"]
