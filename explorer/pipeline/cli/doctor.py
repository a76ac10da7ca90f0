"""``explorer doctor TARGET``: why a running job stopped moving, in the schedule's words.

TARGET is the launcher's PID (torchrun, deepspeed, ``explorer run``, a script that starts the
ranks), the ranks' PIDs, the run folder the ranks write to (live where they still run, else
from what they wrote), a folder of the ranks' Flight Recorder dumps, or a folder of the stacks
they left (``--save``'s, ``py-spy dump`` outputs, or their logs holding the tracebacks they
printed as they died: torchrun's ``--log-dir``, one console log). Prints one line per
rank (what it is doing, with whom, in which instruction, since when) and the verdict: a
wait-for cycle, the rank everyone waits on, or a collective mismatch.
Where the plan is known (``--kind``/``--from``, else the schedule the run folder holds), each
rank's recorded order is checked against it and the first point one left it is named. The job is
read, never stopped or changed. Exit 1 when the ranks wait (a hang named), 0 when no rank waits
on another, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from explorer import cli_options
from explorer.errors import InputError, excerpt
from explorer.inputs import check_plain_files
from explorer.pipeline.cli.schedule_options import (
    ANALYSIS_LIMITS,
    add_schedule_choice,
    schedule_from_args,
)
from explorer.verdict import with_verdict

if TYPE_CHECKING:
    from explorer.pipeline.analysis.departure import Departure
    from explorer.pipeline.runtime.doctor import Diagnosis


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="diagnose a job that stopped moving, live: the wait-for cycle or the rank everyone waits on",
        description=__doc__.splitlines()[0],
    )
    p.add_argument(
        "target",
        nargs="+",
        type=_target,
        metavar="TARGET",
        help="the launcher's PID (its process tree is read), the ranks' PIDs, or a run folder",
    )
    p.add_argument(
        "--folder",
        type=_folder,
        help="the run folder the ranks write rank<R>.jsonl to (found from the ranks' command lines otherwise)",
    )
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON (kind: hang)")
    p.add_argument(
        "--save",
        type=_save_folder,
        metavar="DIR",
        help="also write each rank's stack (and the run's spec.json) to DIR: `explorer doctor DIR` "
        "gives the same verdict after the job is gone, on any machine",
    )
    plan = p.add_argument_group(
        "plan",
        "the schedule the ranks should run (default: the one the run folder holds): each rank's "
        "recorded order is checked against it, and the first point one left it is named",
    )
    add_schedule_choice(plan, ANALYSIS_LIMITS)
    p.set_defaults(func=run, timeout=60.0)


def _folder(text: str) -> Path:
    """``--folder``: any path but the empty one (``Path('')`` would be the current folder)."""
    return Path(cli_options.given_path("the job's run folder, or leave --folder out")(text))


def _save_folder(text: str) -> Path:
    return Path(cli_options.given_path("a folder to write the stacks into")(text))


def _target(text: str) -> int | Path:
    if text.isdigit() and int(text) > 0:
        return int(text)
    if text and Path(text).is_dir():  # Path('') is the current folder, not a folder given
        return Path(text)
    raise argparse.ArgumentTypeError(
        f"TARGET {text!r}: give a process id (a positive integer) or a run folder that exists"
    )


def run(args: argparse.Namespace) -> int:
    if args.folder is not None and not args.folder.is_dir():
        raise InputError(
            f"--folder {args.folder}: no such folder; give the job's run folder or leave it out"
        )
    from explorer.pipeline.runtime.doctor import doctor

    pids = [t for t in args.target if isinstance(t, int)]
    if 1 in pids:
        raise InputError(
            "pid 1 is the system's init, the parent of every process: give the pid of the "
            "job's launcher (torchrun, deepspeed) or of its ranks"
        )
    folders = [t for t in args.target if isinstance(t, Path)]
    for folder in [*folders, *([args.folder] if args.folder is not None else [])]:
        check_plain_files(str(folder), "")
        _rank_files_are_files(folder)
    if len(folders) > 1 or (folders and args.folder is not None):
        raise InputError("give one run folder (as TARGET or --folder), not several")
    plan = schedule_from_args(args) if args.kind or args.from_class else None
    if plan is None:
        sized = [
            o for o, v in (("--stages", args.stages), ("--microbatches", args.microbatches)) if v
        ]
        if sized:  # without a plan they were silently ignored
            raise InputError(
                f"{' and '.join(sized)} {'size' if len(sized) > 1 else 'sizes'} a plan: give "
                "--kind or --from with them, or drop them"
            )
    if args.save is not None and not pids:
        raise InputError("--save DIR saves a running job's stacks: give the job's PIDs with it")
    if args.save is not None:
        from explorer.pipeline.traces.stack_folder import clear_saved

        clear_saved(args.save)  # refused before the job is read: a file, a folder of other files
    diagnosis = doctor(
        pids, args.folder or (folders[0] if folders else None), plan=plan, save=args.save
    )
    code = _report(diagnosis, args.json)
    if args.save is not None and not args.json:
        print(f"stacks saved to {args.save}: `explorer doctor {args.save}` reads them again")
    return code


def _rank_files_are_files(folder: Path) -> None:
    """A ``rank<R>.jsonl`` that is a folder is no rank's file: the doctor once read it as rank R,
    "gone", where read, check and run --collect refused the folder."""
    odd = next((p for p in sorted(folder.glob("rank*.jsonl")) if not p.is_file()), None)
    if odd is not None:
        what = (
            "a directory"
            if odd.is_dir()
            else "a link to nothing"
            if odd.is_symlink() and not odd.exists()
            else "no regular file"
        )
        raise InputError(
            f"{odd.name} in {excerpt(str(folder))} is {what}, not a rank's file (rank<R>.jsonl): "
            "move it out of the run folder"
        )


def _plan_words(departures: Sequence[Departure]) -> str:
    """The ranks against the plan: kept to it, or where the first left it (and the others)."""
    if not departures:
        return "plan: every rank's recorded order kept to it"
    first, *rest = departures
    lines = [f"plan: {first.sentence()} (the first to leave it)"]
    lines += [f"  then {d.sentence()}" for d in rest]
    return "\n".join(lines)


def read(path: Path, json_out: bool) -> int:
    """``explorer read DIR`` on a folder of Flight Recorder dumps or of stacks: the doctor's verdict."""
    from explorer.pipeline.runtime.doctor import doctor

    return _report(doctor([], path), json_out)


def _report(diagnosis: Diagnosis, json_out: bool) -> int:
    """Print the diagnosis (text or JSON); the exit code (and the document's ``ok``): 0 when no
    rank waits, none is gone without finishing and none left the plan, else 1."""
    verdict = diagnosis.verdict
    left = bool(diagnosis.departures)  # a rank that left the plan is a finding, as a wait is
    # a rank gone without an end while the others finished (killed, its file cut) waits on no
    # one, and still did not run its schedule
    gone = any(s.activity == "gone" for s in verdict.ranks)
    clean = verdict.verdict in ("finished", "moving", "starting") or (
        verdict.verdict == "no-wait" and not gone
    )
    code = 0 if clean and not left else 1
    if json_out:
        print(json.dumps(with_verdict(diagnosis.to_dict(), code), indent=1))
    else:
        if diagnosis.refused:
            print(diagnosis.refused)
        for state in verdict.ranks:
            print(f"  {state.describe()}")
        for name, run in diagnosis.foreign:
            print(f"  {name} is another run's ({run}): not read as this run's")
        print(f"verdict: {verdict.describe()}")
        if verdict.deadlock is not None:
            print(f"  as the analysis says it: {verdict.deadlock.describe()}")
        if verdict.quiet_s is not None and verdict.verdict not in (
            "finished",
            "moving",
            "starting",
        ):
            print(f"  no rank has written progress for {verdict.quiet_s:.1f} s")
        if diagnosis.departures is not None:
            print(_plan_words(diagnosis.departures))
        if diagnosis.source == "stacks":
            print(
                f"(read from the stacks the ranks left in {diagnosis.folder} in {diagnosis.seconds:.2f} s)"
            )
        elif diagnosis.source == "flight-recorder":
            print(
                f"(read from the Flight Recorder dumps in {diagnosis.folder} in {diagnosis.seconds:.2f} s)"
            )
        elif diagnosis.live:
            print(
                f"(read in {diagnosis.seconds:.2f} s, {diagnosis.live} live stacks; the job was not stopped)"
            )
        else:
            print(
                f"(read from {diagnosis.folder} in {diagnosis.seconds:.2f} s: no rank is running)"
            )
    return code


__all__ = ["read", "register", "run"]
