"""``explorer xla-run``: run real PyTorch/XLA steps in a child process and explain every new graph.

``--scenario NAME`` runs a preset; ``--step MODULE:FUNCTION`` runs the user's own
``step(step_index)`` in the child with the same capture. ``--json`` prints
``{"ok", "device", "steps", "graphs", "failure"}``, ``ok`` true exactly when the exit code is 0. Exit 0 when the run settled (no new graph
after the two warm-up steps: the first graph, then the one with optimizer state), 1 for
findings (a new graph later, or a child that failed or aborted), 2 for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from explorer import cli_options
from explorer.inputs import write_text
from explorer.verdict import with_verdict
from explorer.xla.runtime.presets import PRESETS

_SMALL = "keep the model small: large graphs take many GB to compile on XLA:CPU"

#: Steps 0 and 1 may compile (first graph; optimizer state appears): later new graphs are findings.
WARMUP_STEPS = 2


def register(subparsers: Any) -> None:
    """Add the ``xla-run`` sub-command."""
    p = subparsers.add_parser(
        "xla-run",
        help="run a real PyTorch/XLA FSDP step in a child process; explain every recompile",
        description=__doc__.splitlines()[0],
    )
    cli_options.add_scenario_or_step(
        p, PRESETS, preset="a preset step", step="your own step(step_index) on the XLA device"
    )
    p.add_argument(
        "--steps",
        default=0,  # not a value a user can give (lo=1): the preset's count
        help="steps to run (default: the preset's, 6 for --step)",
        type=cli_options.count(
            "--steps",
            lo=1,
            hi=500,
            label="steps",
            what="number of steps",
            why="each step is a real XLA step",
        ),
    )
    p.add_argument(
        "--model", default="encoder", help="the preset model (encoder: a small BERT-like encoder)"
    )
    p.add_argument(
        "--layers",
        default=2,
        help="encoder layers (default 2)",
        type=cli_options.count("--layers", hi=12, label="layers", why=_SMALL),
    )
    p.add_argument(
        "--width",
        default=32,
        help="encoder width (default 32)",
        type=cli_options.count("--width", hi=1024, label="width", why=_SMALL),
    )
    p.add_argument(
        "--bucket-mb",
        default=None,
        help="reduce_scatter_bucket_size_mb (default: the preset's)",
        type=cli_options.number(
            "--bucket-mb",
            0.0,
            1e6,
            label="bucket size (MB)",
            why="a terabyte; 0 turns bucketing off",
        ),
    )
    p.add_argument(
        "--fsdp",
        choices=("v1", "v2"),
        default="v1",
        help="v1: XlaFullyShardedDataParallel (world size 1 on CPU); v2: SPMD over virtual devices",
    )
    p.add_argument(
        "--virtual-devices",
        default=4,
        help="CPU devices for --fsdp v2 (default 4)",
        type=cli_options.count(
            "--virtual-devices",
            hi=64,
            label="virtual devices",
            why="each is a CPU device XLA compiles for",
        ),
    )
    p.add_argument(
        "--fsdp-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another FSDP keyword argument (value read as JSON), repeatable",
    )
    p.add_argument(
        "--no-cpu-workarounds",
        action="store_true",
        help="do not apply pin_layout_in_collective_ops=False on CPU (bucketing then aborts)",
    )
    p.add_argument(
        "--live-report",
        default=None,
        metavar="THRESHOLD",
        type=cli_options.count(
            "--live-report", lo=0, label="live report threshold", what="node count"
        ),
        help="keep torch_xla's live-tensor report before each sync (tensors with more IR nodes)",
    )
    p.add_argument(
        "--no-source-lines",
        action="store_true",
        help="leave out XLA_IR_DEBUG/XLA_HLO_DEBUG: no Python lines in the HLO at all",
    )
    p.add_argument(
        "--lines-settle",
        default=2,
        metavar="N",
        type=cli_options.count(
            "--lines-settle",
            lo=0,
            hi=500,
            label="lines settle",
            what="number of steps",
            why="no run has more steps",
        ),
        help="switch source lines off after N steps in a row without a compile, on again after a "
        "compile (default 2; 0 keeps them on every step, at ~40%% per cached step)",
    )
    p.add_argument(
        "--save-tensors",
        action="store_true",
        help="also set XLA_SAVE_TENSORS_FILE (HLO of every execution, with its graph hash) in --out",
    )
    p.add_argument(
        "--timeout",
        default=300.0,
        help="seconds before the child is stopped (default 300)",
        type=cli_options.seconds("--timeout", "a day"),
    )
    p.add_argument(
        "--out",
        default=None,
        metavar="DIR",
        type=cli_options.output_dir("--out"),
        help="keep the debug log, HLO dumps and run.json here",
    )
    p.add_argument("--json", action="store_true", help="print the JSON document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run, print, and return 0 (settled), 1 (findings) or 2 (bad input, via InputError)."""
    from explorer.xla.runtime.config import RunConfig, parse_fsdp_options
    from explorer.xla.runtime.launch import claim_folder
    from explorer.xla.runtime.run import run as run_config
    from explorer.xla.traces.records import RUN_FILE

    cfg = RunConfig(
        scenario=args.scenario,
        step=args.step,
        steps=args.steps,
        model=args.model,
        layers=args.layers,
        width=args.width,
        bucket_mb=args.bucket_mb,
        fsdp=args.fsdp,
        virtual_devices=args.virtual_devices,
        cpu_workarounds=not args.no_cpu_workarounds,
        fsdp_options=parse_fsdp_options(args.fsdp_option),
        live_report=args.live_report,
        source_lines=not args.no_source_lines,
        lines_settle=args.lines_settle,
        save_tensors=args.save_tensors,
        timeout_s=args.timeout,
    )
    # held until run.json is written: no other run may set this one aside before it is whole
    lock = claim_folder(args.out) if args.out else None
    try:
        result = run_config(cfg, args.out, claimed=lock is not None)
        code = 1 if result.failure or late_new_graph(result.steps) else 0
        doc = with_verdict(result.to_json(), code)
        print(json.dumps(doc, indent=1) if args.json else report(result), flush=True)
        if args.out:  # after the result is printed: a folder that fails now loses no run
            write_text(os.path.join(args.out, RUN_FILE), json.dumps(doc, indent=1), "--out")
    finally:
        if lock is not None:
            lock.release()
    if result.failure:
        print(
            f"explorer xla-run: the child failed ({result.failure.kind}): {result.failure.message}",
            file=sys.stderr,
        )
    return code


def late_new_graph(steps: Any) -> bool:
    """A graph not seen before compiled after the warm-up steps: the finding xla-run exits 1 for."""
    return any(s.new_graph and s.step >= WARMUP_STEPS for s in steps)


def report(result: Any) -> str:
    """A short text report: one line per step, then the distinct graphs."""
    dev = result.device
    lines = [
        f"{result.label}: {dev.get('pjrt_device', '?')} x{dev.get('devices', '?')}, {dev.get('wrapper', '')}"
    ]
    for w in dev.get("workarounds", []):
        lines.append(f"  workaround: {w}")
    lines.append("step  compiled  compile ms  execute ms  params  graph     because")
    for s in result.steps:
        compile_ms = "-" if s.compile_ms is None else f"{s.compile_ms:.1f}"
        execute_ms = "-" if s.execute_ms is None else f"{s.execute_ms:.2f}"
        lines.append(
            f"{s.step:4d}  {'yes' if s.compiled else 'no ':8s}  {compile_ms:>10}  {execute_ms:>10}  "
            f"{s.num_parameters if s.num_parameters is not None else '-':>6}  {(s.graph_hash or '-')[:8]:8s}  "
            f"{s.cause}"
        )
    lines.append(f"{len(result.graphs)} distinct graph(s):")
    for g in result.graphs:
        where = "setup" if g.step < 0 else f"step {g.step}"
        lines.append(
            f"  {g.graph_hash[:8]}  {where:8s} group {g.group:2d}  {g.instructions or '?'} instructions, "
            f"{g.num_parameters} parameters, ran at steps {g.steps_ran or '-'}"
        )
    return "\n".join(lines)


__all__ = ["WARMUP_STEPS", "late_new_graph", "register", "run", "report"]
