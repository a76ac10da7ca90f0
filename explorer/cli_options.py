"""The validation layer every command shares: numbers, sizes and paths, checked at the edge.

Argument types here run while argparse parses, so a bad number is refused in milliseconds,
before any heavy package (torch, torch_xla) is imported and before anything is allocated or
started. Each refusal names the option, quotes a short excerpt of what was given, states the
constraint and says what to change; ``explorer.cli`` prints it as one line and exits 2.

Limits are there because an unbounded input does not fail, it runs on: 20,000 stages by
20,000 micro-batches take 12 GB, a real run of 100,000 micro-batches takes hours. Each limit
says why it is where it is.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from typing import Callable, Iterable, Optional

from explorer.errors import InputError, excerpt
from explorer.inputs import (
    check_input_file,
    check_output_dir,
    check_output_file,
    check_path_given,
)
from explorer.loading import split_ref

_INTEGER = re.compile(r"\s*[+-]?\d+\s*")

#: Stages an analysed schedule may have (stages x chunks; 2 x ranks for dualpipev).
MAX_STAGES = 1024
#: Micro-batches an analysed schedule may have.
MAX_MICROBATCHES = 65536
#: Stages x micro-batches an analysed schedule may have: about 1.5 KB of memory each in the
#: analyses (1,024 x 1,024 takes 1.8 GB and 10 s on one core; 20,000 x 20,000 would take ~600 GB).
MAX_CELLS = 2**20
#: Seconds a whole day: the longest timeout any command accepts.
MAX_SECONDS = 86400.0


def _name(option: str) -> str:
    return option.lstrip("-").replace("-", " ")


def count(
    option: str,
    lo: int = 1,
    hi: int = 2**31 - 1,
    why: str = "",
    label: Optional[str] = None,
    what: str = "integer",
) -> Callable[[str], int]:
    """An argparse type: an integer in ``lo..hi`` (``why`` explains the upper limit)."""
    label = label or _name(option)

    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(
                f"{label} must be a whole number, e.g. {max(lo, 1) * 4}; got {excerpt(text)}"
            )
        digits = text.strip().lstrip("+-").lstrip("0")
        # int() refuses more than 4,300 digits: a number that long is only compared with the limits
        value = (
            int(text) if len(digits) <= 40 else (-1 if text.strip().startswith("-") else 1) * 10**40
        )
        if value < lo:
            kind = "positive integer" if lo == 1 else f"{what} of at least {lo}"
            raise argparse.ArgumentTypeError(
                f"{label} must be a {kind}; got {excerpt(text.strip())}"
            )
        if value > hi:
            reason = f" ({why})" if why else ""
            raise argparse.ArgumentTypeError(
                f"{label} {excerpt(text.strip())} is more than the limit of "
                f"{hi:,}{reason}: use {hi:,} or less"
            )
        return value

    parse.__name__ = "integer"
    return parse


def number(
    option: str,
    lo: float = 0.0,
    hi: float = 1e12,
    *,
    lo_open: bool = False,
    why: str = "",
    label: Optional[str] = None,
) -> Callable[[str], float]:
    """An argparse type: a finite float in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``); no NaN, no infinity."""
    label = label or _name(option)

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{label} must be a number, e.g. 10; got {excerpt(text)}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{label} must be a finite number; got {excerpt(text)} "
                f"(NaN and infinity have no meaning here): give a value up to {hi:g}"
            )
        if value < lo or (lo_open and value == lo):
            bound = f"more than {lo:g}" if lo_open else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"{label} must be {bound}; got {excerpt(text)}")
        if value > hi:
            reason = f" ({why})" if why else ""
            raise argparse.ArgumentTypeError(
                f"{label} {excerpt(text)} is more than the limit of {hi:g}{reason}"
            )
        return value

    parse.__name__ = "number"
    return parse


def seconds(option: str, why: str) -> Callable[[str], float]:
    """A timeout: a finite number of seconds, more than 0 and at most a day."""
    return number(option, 0.0, MAX_SECONDS, lo_open=True, why=why)


def _path_type(check: Callable[[str], object], name: str) -> Callable[[str], str]:
    """An argparse type that runs ``check`` on the text and turns its InputError into argparse's
    error (one line, exit 2); ``name`` is what argparse calls the value."""

    def parse(text: str) -> str:
        try:
            check(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parse.__name__ = name
    return parse


def input_file(option: str, limit: Optional[int] = None) -> Callable[[str], str]:
    """An argparse type: a regular, readable file of at most ``limit`` bytes (checked, not read)."""
    if limit is None:
        return _path_type(lambda text: check_input_file(text, ""), "file")
    return _path_type(lambda text: check_input_file(text, "", limit), "file")


def given_path(give: str) -> Callable[[str], str]:
    """An argparse type: any path but the empty one (``Path('')`` is the current folder, which
    would be read as if the user had named it); ``give`` says what to give instead."""
    return _path_type(lambda text: check_path_given(text, "", give), "path")


#: The ``args`` names of every output-file option (``--html`` is ``html``): what
#: :func:`refuse_outputs_that_are_inputs` compares with the command's other paths.
OUTPUT_FILE_DESTS: set[str] = set()


def output_file(option: str) -> Callable[[str], str]:
    """An argparse type: a file that can be written (its folder exists; not a folder, not a device)."""
    OUTPUT_FILE_DESTS.add(option.lstrip("-").replace("-", "_"))
    return _path_type(lambda text: check_output_file(text, ""), "file")


def refuse_outputs_that_are_inputs(args: argparse.Namespace) -> None:
    """Refuse an output file that is one of the command's own inputs (``hlo-diff a b --html a``,
    ``schedule --from x.csv --out x.csv``): writing it would replace what is being read, and a
    later read of it would describe the report, not the input."""
    values = vars(args)
    inputs = [
        v
        for name, value in values.items()
        if name not in OUTPUT_FILE_DESTS and name != "argv"  # argv: the command line as given
        for v in (value if isinstance(value, list) else [value])
        if isinstance(v, str) and v
    ]
    for name in sorted(OUTPUT_FILE_DESTS & values.keys()):
        out = values[name]
        if isinstance(out, str) and out and any(_same_file(out, v) for v in inputs):
            option = "--" + name.replace("_", "-")
            raise InputError(
                f"{option} {excerpt(out)} is also an input of this command: writing it would "
                "replace what is read; give another file"
            )


def _same_file(a: str, b: str) -> bool:
    """Whether two paths name one existing file (a path that is not a file names none)."""
    try:
        return os.path.samefile(a, b) and os.path.isfile(a)
    except (OSError, ValueError):
        return False


def output_dir(option: str) -> Callable[[str], str]:
    """An argparse type: a folder that exists or can be created."""
    return _path_type(lambda text: check_output_dir(text, ""), "folder")


def user_ref(
    option: str, example: str, what: str = "MODULE:FUNCTION", *, files: bool = False
) -> Callable[[str], str]:
    """An argparse type: ``MODULE:NAME`` (or, with ``files``, ``path/file.py:NAME``) with sane parts.

    Only the shape is checked (:func:`explorer.loading.split_ref`); nothing is imported here.
    """

    def parse(text: str) -> str:
        try:
            split_ref(text, option, example, what, files=files)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    parse.__name__ = what
    return parse


def schedule_size(kind: Optional[str], stages: int, microbatches: int, chunks: int = 1) -> None:
    """Refuse a schedule too large to analyse before anything is allocated (see :data:`MAX_CELLS`)."""
    total = stages * (2 if kind == "dualpipev" else chunks)
    shape = (
        f"{stages:,} stages"
        + (f" x {chunks} chunks" if chunks > 1 and kind != "dualpipev" else "")
        + (" (2 stages per rank in a V)" if kind == "dualpipev" else "")
    )
    if total > MAX_STAGES:
        raise InputError(
            f"{shape} make {total:,} pipeline stages, more than the limit of {MAX_STAGES:,}: every "
            "stage is analysed step by step and the grid of stages x steps is held in memory; "
            "use fewer stages"
        )
    if microbatches > MAX_MICROBATCHES:
        raise InputError(
            f"{microbatches:,} micro-batches is more than the limit of {MAX_MICROBATCHES:,}: every "
            "instruction is held in memory; use fewer micro-batches (the pattern repeats)"
        )
    cells = total * microbatches
    if cells > MAX_CELLS:
        raise InputError(
            f"{total:,} stages x {microbatches:,} micro-batches = {cells:,} is more than the limit of "
            f"{MAX_CELLS:,}: the analyses hold about 1.5 KB per stage and micro-batch "
            f"(~{cells * 1.5e3 / 2**30:,.0f} GB here); use fewer stages or micro-batches"
        )


def add_scenario_or_step(
    parser: argparse.ArgumentParser, presets: Iterable[str], preset: str, step: str
) -> None:
    """``--scenario NAME`` (one of ``presets``) or ``--step MODULE:FUNCTION``, exactly one.

    ``compile-probe`` and ``xla-run`` both run either a preset or the user's own step; the
    pair is declared here once, so both refuse a bad ``--step`` in the same words.
    """
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--scenario", choices=list(presets), help=preset)
    what.add_argument(
        "--step",
        metavar="MODULE:FUNCTION",
        type=user_ref("--step", "my_train:step or train.py:step", files=True),
        help=step,
    )


__all__ = [
    "MAX_STAGES",
    "add_scenario_or_step",
    "MAX_MICROBATCHES",
    "MAX_CELLS",
    "MAX_SECONDS",
    "count",
    "number",
    "seconds",
    "input_file",
    "given_path",
    "output_file",
    "output_dir",
    "user_ref",
    "schedule_size",
]
