"""PyTorch's Flight Recorder dumps, one per rank, read without torch.

torch writes a rank's ring buffer of collectives as a pickle (``_dump_fr_trace``, or the file
``TORCH_FR_DUMP_TEMP_FILE + str(rank)`` where the process group dumps on a timeout, which NCCL
does and gloo does not) or as JSON (``_dump_fr_trace_json``, without the Python frames). Both
hold ``version``, ``pg_config`` (each group's ranks) and ``entries``: per collective its
``collective_seq_id`` on its group, ``profiling_name`` (``gloo:all_reduce``), sizes, state
and, in the pickle, the frames that called it.

A folder of dumps is one job's: files named a common prefix and the rank (``fr_0``,
``fr_1.json``). Pickles are loaded with builtins only (no class is ever constructed), so a
foreign pickle is refused, not run. Every problem is an :class:`~explorer.errors.InputError`
naming the file and what to give instead.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from explorer.errors import InputError

_NAME = re.compile(r"^(?P<prefix>.*?)(?P<rank>\d+)(?:\.(?:json|pkl|pickle))?$")
#: Frames of these paths are the library's; the user's own line is the innermost outside them.
_LIBRARY = ("/torch/", "/site-packages/", "/dist-packages/", "/lib/python3")
#: Two ranks whose buffers lie this far apart in time were not one job.
_APART_NS = 3600 * 10**9


@dataclass(frozen=True)
class Entry:
    """One collective as a rank recorded it."""

    seq: int  # collective_seq_id: the collective's number on its group (1 first)
    op: str  # all_reduce, barrier, ... (the backend prefix dropped)
    group: str  # the group's name ("0" is the default group)
    group_desc: str  # "default_pg", or the name the job gave it
    sizes: tuple  # input sizes, as nested tuples
    dtypes: tuple[str, ...]
    state: str  # scheduled, started, completed
    is_p2p: bool
    where: str  # the user's file:line that called it ("" in a JSON dump)
    created_ns: int

    def what(self) -> str:
        return f"{self.op}{'' if not self.where else f' ({self.where})'}"


@dataclass(frozen=True)
class RankDump:
    """One rank's dump: its file, its groups' ranks and its entries in order."""

    rank: int
    path: Path
    version: str
    groups: dict[str, tuple[int, ...]]  # group name -> its ranks
    entries: tuple[Entry, ...]

    @property
    def world(self) -> Optional[int]:
        """The default group's size (None where the dump does not say)."""
        ranks = self.groups.get("0") or self.groups.get("")
        return len(ranks) if ranks else None


@dataclass(frozen=True)
class FlightDumps:
    """A job's dumps by rank, and the ranks of the job that left none."""

    folder: Path
    dumps: dict[int, RankDump]
    missing: tuple[int, ...]

    @property
    def world(self) -> int:
        sizes = [d.world for d in self.dumps.values() if d.world]
        return max(sizes + [max(self.dumps) + 1 if self.dumps else 0])


def dump_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that look like Flight Recorder dumps (name ending in a rank, dump-like start)."""
    if not folder.is_dir():
        return []
    return [
        p for p in sorted(folder.iterdir()) if p.is_file() and _NAME.match(p.name) and _looks(p)
    ]


def is_flight_folder(path: Path) -> bool:
    return bool(dump_files(path))


def read_dumps(folder: Path) -> FlightDumps:
    """Every rank's dump in ``folder``; an InputError where they are not one job's readable dumps."""
    files = dump_files(folder)
    if not files:
        raise InputError(
            f"{folder} holds no Flight Recorder dump: give the folder the ranks dumped to "
            "(TORCH_FR_DUMP_TEMP_FILE=<folder>/fr_, or _dump_fr_trace() written to <prefix><rank>)"
        )
    prefixes = sorted({_prefix(p) for p in files})
    if len(prefixes) > 1:
        raise InputError(
            f"{folder} mixes dumps named {', '.join(repr(p + '<rank>') for p in prefixes)}: "
            "those are different jobs' dumps; give a folder with one job's"
        )
    dumps: dict[int, RankDump] = {}
    for path in files:
        dump = read_dump(path)
        if dump.rank in dumps:
            raise InputError(
                f"{path.name} and {dumps[dump.rank].path.name} are both rank {dump.rank}'s dump: "
                "give one job's dumps, one file per rank"
            )
        dumps[dump.rank] = dump
    _one_job(folder, dumps)
    world = max([d.world or 0 for d in dumps.values()] + [max(dumps) + 1])
    missing = tuple(r for r in range(world) if r not in dumps)
    return FlightDumps(folder, dumps, missing)


def read_dump(path: Path) -> RankDump:
    """One rank's dump (pickle or JSON); InputError where it is cut short or not a dump."""
    match = _NAME.match(path.name)
    if match is None:
        raise InputError(
            f"{path.name}: a dump's name ends in its rank (fr_0, fr_1.json); rename it"
        )
    raw = path.read_bytes()
    data = _decode(path, raw)
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        raise InputError(
            f"{path}: not a Flight Recorder dump (no 'entries' list); give the files torch's "
            "_dump_fr_trace / _dump_fr_trace_json or TORCH_FR_DUMP_TEMP_FILE wrote"
        )
    try:
        entries = tuple(_entry(e) for e in data["entries"])
        groups = {
            str(name): tuple(json.loads(str(cfg.get("ranks", "[]"))))
            for name, cfg in (data.get("pg_config") or {}).items()
        }
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
        raise InputError(
            f"{path}: a Flight Recorder entry lacks what it should hold ({exc}); give an "
            "unedited dump"
        ) from None
    return RankDump(int(match["rank"]), path, str(data.get("version", "?")), groups, entries)


def _decode(path: Path, raw: bytes) -> Any:
    if raw[:1] == b"{":
        try:
            return json.loads(raw)
        except ValueError:
            raise InputError(
                f"{path}: cut short or not JSON; give the complete dump _dump_fr_trace_json wrote"
            ) from None
    try:
        return _Builtins(io.BytesIO(raw)).load()
    except pickle.UnpicklingError as exc:
        raise InputError(
            f"{path}: not a Flight Recorder pickle ({exc}); give torch's own dump"
        ) from None
    except (EOFError, ValueError, IndexError, KeyError):
        raise InputError(
            f"{path}: cut short (the pickle ends early); give the complete dump the rank wrote"
        ) from None
    except (Exception, MemoryError, RecursionError) as exc:  # damaged bytes: any opcode may fail
        raise InputError(
            f"{path}: damaged, not a readable pickle ({type(exc).__name__}); give the dump "
            "torch wrote, unedited"
        ) from None


class _Builtins(pickle.Unpickler):
    """An unpickler that builds dicts, lists, tuples, strings and numbers, and no object."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it holds a {module}.{name} object")


def _entry(e: dict) -> Entry:
    group = e.get("process_group") or ("", "")
    return Entry(
        seq=int(e["collective_seq_id"]),
        op=str(e["profiling_name"]).split(":", 1)[-1],
        group=str(group[0]),
        group_desc=str(group[1]) if len(group) > 1 else "",
        sizes=_tuple(e.get("input_sizes") or []),
        dtypes=tuple(str(d) for d in e.get("input_dtypes") or []),
        state=str(e.get("state", "")),
        is_p2p=bool(e.get("is_p2p", False)),
        where=_user_frame(e.get("frames") or []),
        created_ns=int(e.get("time_created_ns") or 0),
    )


def _user_frame(frames: list) -> str:
    for f in frames:
        file = str(f.get("filename", ""))
        if file and not any(mark in file for mark in _LIBRARY):
            return f"{file}:{f.get('line')}"
    return ""


def _tuple(value: Any) -> Any:
    return tuple(_tuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def _prefix(path: Path) -> str:
    match = _NAME.match(path.name)
    return match["prefix"] if match else path.name


def _looks(path: Path) -> bool:
    """A pickle's protocol byte, or JSON naming ``entries`` near its start."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head[:1] == b"\x80" or (head[:1] == b"{" and b'"entries"' in head)


def _one_job(folder: Path, dumps: dict[int, RankDump]) -> None:
    """InputError where the dumps disagree on the job's size or lie hours apart."""
    sizes = {r: d.world for r, d in dumps.items() if d.world}
    if len(set(sizes.values())) > 1:
        said = ", ".join(f"rank {r}: {n} ranks" for r, n in sorted(sizes.items()))
        raise InputError(
            f"{folder}: the dumps disagree on the job's size ({said}): they are different jobs'; "
            "give a folder with one job's dumps"
        )
    starts = {r: min(e.created_ns for e in d.entries) for r, d in dumps.items() if d.entries}
    if starts and max(starts.values()) - min(starts.values()) > _APART_NS:
        first, last = min(starts, key=starts.__getitem__), max(starts, key=starts.__getitem__)
        raise InputError(
            f"{folder}: rank {first}'s and rank {last}'s dumps start over an hour apart: they are "
            "different jobs'; give a folder with one job's dumps"
        )


__all__ = [
    "Entry",
    "FlightDumps",
    "RankDump",
    "dump_files",
    "is_flight_folder",
    "read_dump",
    "read_dumps",
]
