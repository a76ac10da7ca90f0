"""``explorer doctor TARGET``: why a running job stopped moving, in the schedule's words.

TARGET is the launcher's PID (torchrun, deepspeed, ``explorer run``, a script that starts the
ranks) or the ranks' PIDs. Prints one line per rank (what it is doing, with whom, in which
instruction, since when) and the verdict: a wait-for cycle, or the rank everyone waits on.
The job is read, never stopped or changed. Exit 1 when the ranks wait (a hang named), 0 when
no rank waits on another, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from explorer.errors import InputError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="diagnose a job that stopped moving, live: the wait-for cycle or the rank everyone waits on",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "target",
        nargs="+",
        type=_pid,
        metavar="PID",
        help="the launcher's PID (its process tree is read), or the ranks' PIDs",
    )
    p.add_argument(
        "--folder",
        type=Path,
        help="the run folder the ranks write rank<R>.jsonl to (found from the ranks' command lines otherwise)",
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (kind: hang)")
    p.set_defaults(func=run)


def _pid(text: str) -> int:
    if not text.isdigit() or int(text) <= 0:
        raise argparse.ArgumentTypeError(f"PID {text!r}: give a process id, a positive integer")
    return int(text)


def run(args: argparse.Namespace) -> int:
    if args.folder is not None and not args.folder.is_dir():
        raise InputError(
            f"--folder {args.folder}: no such folder; give the job's run folder or leave it out"
        )
    from explorer.pipeline.runtime.doctor import doctor

    diagnosis = doctor(args.target, args.folder)
    verdict = diagnosis.verdict
    if args.json:
        print(json.dumps(diagnosis.to_dict(), indent=1))
    else:
        if diagnosis.refused:
            print(diagnosis.refused)
        for state in verdict.ranks:
            print(f"  {state.describe()}")
        print(f"verdict: {verdict.describe()}")
        if verdict.deadlock is not None:
            print(f"  as the analysis says it: {verdict.deadlock.describe()}")
        print(f"(read in {diagnosis.seconds:.2f} s; the job was not stopped)")
    return 0 if verdict.verdict == "no-wait" else 1


__all__ = ["register", "run"]
