"""``explorer read PATH``: whatever a job left behind, answered with the same report as a run.

The kind of the artifact is detected (:mod:`explorer.traces.detect`); its reader prints the
same text and ``--json`` document as the command that would have made it (``run`` for a run
folder). Exit codes follow that command: 0 ok, 1 findings or a failed run, 2 bad input.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from pathlib import Path

from explorer.commands import validate
from explorer.errors import InputError
from explorer.traces.detect import detect


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "read",
        help="read what a job left behind (run folders, traces, dumps) and report on it",
        description=__doc__.splitlines()[0],
    )
    p.add_argument("path", metavar="PATH", help="a file or folder a job wrote")
    p.add_argument("--json", action="store_true", help="print the report as JSON (with kind: ...)")
    p.add_argument(
        "--html",
        metavar="FILE",
        type=validate.output_file("--html"),
        help="also write the views as one self-contained page (profiler traces of a pipeline job)",
    )
    p.add_argument(
        "--from",
        dest="plan",
        metavar="FILE.csv",
        help="the planned schedule (PyTorch's CSV) to compare a pipeline job's measured order with",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    found = detect(Path(args.path))
    module, function = found.reader.split(":")
    reader = getattr(importlib.import_module(module), function)
    extra = {}
    for option, name in (("--html", "html"), ("--from", "plan")):
        if getattr(args, name, None):
            if name not in inspect.signature(reader).parameters:
                raise InputError(
                    f"{option} is not available for {found.kind} ({found.why}); drop it, or point "
                    "explorer read at a pipeline job's profiler traces"
                )
            extra[name] = getattr(args, name)
    return int(reader(Path(args.path), args.json, **extra))


__all__ = ["register", "run"]
