"""``explorer read PATH``: whatever a job left behind, answered with the same report as a run.

The kind of the artifact is detected by the first detector of :data:`KINDS` that recognises
it; its reader prints the same text and ``--json`` document as the command that would have
made it (``run`` for a run folder). Exit codes follow that command: 0 ok, 1 findings or a
failed run, 2 bad input.

This is the door over the three products: it alone imports every product's detector and
reader, and their order is written here once, where every kind is in view.
"""

from __future__ import annotations

import argparse
import inspect
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from explorer import cli_options
from explorer.compile.cli import read as compile_read
from explorer.compile.traces.detect import TORCH_TRACE
from explorer.detect import Detected, Detector, first_recognised
from explorer.errors import InputError
from explorer.inputs import check_plain_files
from explorer.pipeline.cli import doctor as doctor_cli
from explorer.pipeline.cli import read_instrumented, read_job, read_profile, read_run
from explorer.pipeline.traces.detect import FLIGHT_RECORDER, INSTRUMENTED, RUN_FOLDER, STACKS
from explorer.pipeline.traces.job_folder import JOB_FOLDER
from explorer.pipeline.traces.mesh import Mesh, parse_mesh
from explorer.pipeline.traces.profiler.detect import PROFILE
from explorer.xla.cli import read as xla_read
from explorer.xla.traces.detect import ARTIFACTS


@dataclass(frozen=True)
class Kind:
    """A kind of artifact: how to recognise it, and the reader that answers for it.

    ``read(path, json_out, **options) -> exit code``; the options it accepts are the keyword
    parameters it declares (``html``, ``plan``).
    """

    detector: Detector
    read: Callable[..., int]


#: Tried in this order, the first that recognises a path wins. A compile job's folder may hold
#: profiler traces beside its TORCH_TRACE logs (with distributedInfo whenever a process group
#: existed), and those belong to it: torch-trace comes before pipeline-profile. A job's folder
#: (replicas of one pipeline) is a run folder with more ranks: pipeline-job comes before pipeline-run;
#: an instrumented DeepSpeed job of several data-parallel replicas is read as a job too, so it
#: comes before the instrumented reader of one pipeline.
KINDS: tuple[Kind, ...] = (
    Kind(JOB_FOLDER, read_job.read),
    Kind(INSTRUMENTED, read_instrumented.read),
    Kind(RUN_FOLDER, read_run.read),
    Kind(TORCH_TRACE, compile_read.read),
    Kind(PROFILE, read_profile.read),
    Kind(ARTIFACTS, xla_read.read),
    Kind(FLIGHT_RECORDER, doctor_cli.read),
    Kind(STACKS, doctor_cli.read),
)
#: Every detector, in the order they are tried.
DETECTORS: tuple[Detector, ...] = tuple(k.detector for k in KINDS)


def detect(path: Path) -> Detected:
    """The kind of ``path``, or an InputError naming every kind the explorer reads."""
    return first_recognised(path, DETECTORS)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "read",
        help="read what a job left behind (run folders, traces, dumps) and report on it",
        description=__doc__.splitlines()[0],
        epilog=_kinds_told(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path",
        metavar="PATH",
        type=cli_options.given_path("a file or folder a job left behind"),
        help="a file or folder a job wrote",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON (with kind: ...)")
    p.add_argument(
        "--html",
        metavar="FILE",
        type=cli_options.output_file("--html"),
        help="also write the views as one self-contained page (profiler traces of a pipeline job; "
        "a run folder's grid with its failure and P2P contract violations marked; a job's "
        "folder of many ranks folded to one lane per stage, outlier ranks a click away)",
    )
    p.add_argument(
        "--workers",
        type=cli_options.count(
            "--workers", 1, 256, "more processes than that only wait for the disk"
        ),
        metavar="N",
        help="processes reading a job's rank files (default: every core for a large job)",
    )
    p.add_argument(
        "--mesh",
        metavar="pp=P,dp=D",
        type=_mesh,
        help="how a job's ranks are numbered, outermost dimension first as DeviceMesh reads its "
        "shape: pp=8,dp=128 is rank = stage x 128 + replica (DeepSpeed's, torchtitan's), "
        "dp=128,pp=8 is rank = replica x 8 + stage (default: what the folder says)",
    )
    p.add_argument(
        "--from",
        dest="plan",
        metavar="FILE.csv",
        help="the planned schedule (PyTorch's CSV) to compare a pipeline job's measured order with",
    )
    p.set_defaults(func=run)


def _kinds_told() -> str:
    """Every kind with what it holds, for ``--help``: the refusal of a path names them only."""
    told = [
        textwrap.fill(
            f"{k.detector.kind}: {k.detector.what}",
            79,
            initial_indent="  ",
            subsequent_indent="    ",
        )
        for k in KINDS
    ]
    head = "kinds it reads, tried in this order (the first that recognises PATH reads it):"
    return "\n".join([head, *told])


def _mesh(text: str) -> Mesh:
    """``--mesh`` read as it is parsed (an empty one too): bad input before any work."""
    try:
        return parse_mesh(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--mesh ")) from None


#: What each reader option is for, said when it is given for another kind.
_TAKES = {
    "html": "a pipeline job's profiler traces, a run folder or a job's folder of many ranks",
    "plan": "a pipeline job's profiler traces",
    "workers": "a job's folder of many ranks (replicas of one pipeline, or a TORCH_TRACE folder)",
    "mesh": "a job's folder of many ranks (replicas of one pipeline)",
}


def run(args: argparse.Namespace) -> int:
    if getattr(args, "html", None):
        _html_spares_the_input(Path(args.path), Path(args.html))
    check_plain_files(str(args.path), "")
    found = detect(Path(args.path))
    reader = next(k.read for k in KINDS if k.detector.kind == found.kind)
    extra = {}
    options = (("--html", "html"), ("--from", "plan"), ("--workers", "workers"), ("--mesh", "mesh"))
    for option, name in options:
        if getattr(args, name, None):
            if name not in inspect.signature(reader).parameters:
                raise InputError(
                    f"{option} is not available for {found.kind} ({found.why}); drop it, or point "
                    f"explorer read at {_TAKES[name]}"
                )
            extra[name] = getattr(args, name)
    return int(reader(Path(args.path), args.json, **extra))


def _html_spares_the_input(path: Path, html: Path) -> None:
    """Refuse ``--html`` onto what is being read: ``read DIR --html DIR/rank1.jsonl`` wrote the
    page over the rank's file, and every later read described another folder. A new file in
    the folder is fine."""
    page = html.resolve()
    source = path.resolve()
    if page == source or (source.is_dir() and page.is_file() and source in page.parents):
        raise InputError(
            f"--html {html} would overwrite {'the file' if page == source else 'a file of the folder'} "
            "being read: write the page to a new file"
        )


__all__ = ["DETECTORS", "KINDS", "Kind", "detect", "register", "run"]
