"""A folder of the stacks a job left: read after the fact, one rank's stack per file or per prefix.

What a person (or ``explorer doctor PID --save DIR``) collects from a hung job, or what the job
printed as it died, in any of these forms:

- ``rank<R>.stack.json``: what ``--save`` writes (py-spy's threads, each frame with its source
  line and the lines above, so the verdict does not depend on the files still being there);
- ``rank<R>.json``: ``py-spy dump --json --locals`` as is;
- any text file (``rank<R>.txt``, ``.log``...; torchrun's ``--log-dir`` layout
  ``.../attempt_<n>/<local rank>/stderr.log``; one console log of the whole job) holding
  ``py-spy dump`` output, a Python traceback or a faulthandler dump; lines torch prefixed with
  ``[rankN]:`` are rank N's wherever they are.

A file names its rank by ``rank<R>`` in its name or by torchrun's layout; a rank with a file and
no stack in it (torchrun's empty ``stderr.log`` of a rank the launcher killed) is a rank of the
job that left no stack. No torch here.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from explorer.errors import InputError
from explorer.processes.stack_text import read_text_stack, split_by_rank

SAVED_FORMAT = "explorer-stack"
#: Ranks below the highest named are filled in (as ranks that left nothing) up to this many.
MAX_RANKS = 1 << 17
_RANK_IN_NAME = re.compile(r"(?:^|[^a-z])rank[_-]?(?P<rank>\d+)", re.IGNORECASE)
_TEXT_SUFFIXES = {".txt", ".log", ".out", ".err", ".stderr", ".stdout", ".dump", ""}
_MARKS = (b"Traceback (most recent call last)", b"(most recent call first)", b"Process ")
#: Only a file's last part is read for stacks: a rank's stack is what it printed last.
_TAIL_BYTES = 4 << 20
_MAX_DEPTH = 5
_MAX_FILES = 65536


@dataclass(frozen=True)
class SavedStack:
    """One rank's stack from the folder: its main thread (py-spy's JSON shape) and where it came from."""

    rank: int
    thread: Optional[dict]  # None: saved by --save for a rank that had no stack then
    form: str  # "saved" (--save), "py-spy", "traceback" or "faulthandler"
    file: str
    pid: Optional[int] = None
    state: str = ""  # the process state when saved (R, S, T...), "" when unknown
    ended: str = ""  # the exception that ended the process (a traceback), else ""
    #: What the rank's own file said when saved (--save): last step, quiet seconds, its end.
    log: dict = field(default_factory=dict)
    #: For a rank saved without a stack: what it was said to be then (activity, note).
    said: tuple[str, str] = ("unseen", "")


@dataclass(frozen=True)
class StackFolder:
    """The stacks found, the ranks whose files hold none, and the files that could not be read."""

    folder: Path
    stacks: dict[int, SavedStack]
    without_stack: tuple[int, ...] = ()
    unreadable: tuple[str, ...] = field(default=())

    @property
    def ranks(self) -> list[int]:
        """Every rank the folder names, and every rank below the highest (a job's ranks are
        0..N-1) up to :data:`MAX_RANKS`; past it (a file named ``rank99999999``), the named alone."""
        named = set(self.stacks) | set(self.without_stack)
        if not named:
            return []
        top = max(named)
        return list(range(top + 1)) if top < MAX_RANKS else sorted(named)


def is_stack_folder(folder: Path) -> bool:
    """A cheap look: a file of the folder (or below) holding a stack a rank can be named for
    (the same test the reader applies, on each file's last 64 KB)."""
    for path in _files(folder):
        try:
            with path.open("rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - 65536))
                tail = f.read()
        except OSError:
            continue
        rank = _rank_of(path.relative_to(folder))
        if path.suffix == ".json":
            if SAVED_FORMAT.encode() in tail or (rank is not None and b'"frames"' in tail):
                return True
        elif any(mark in tail for mark in _MARKS) and _has_stack(tail, rank):
            return True
    return False


def read_stack_folder(folder: Path) -> StackFolder:
    """Every rank's last stack in ``folder``; InputError when it holds none."""
    stacks: dict[int, SavedStack] = {}
    without: set[int] = set()
    unreadable: list[str] = []
    for path in _files(folder):
        rank = _rank_of(path.relative_to(folder))
        try:
            found = _read_json(path, rank) if path.suffix == ".json" else _read_text(path, rank)
        except (OSError, ValueError, TypeError, KeyError) as e:
            unreadable.append(f"{path.relative_to(folder)}: {type(e).__name__}")
            continue
        for stack in found:
            stacks[stack.rank] = stack  # files are read in name order: stderr after stdout
        if rank is not None and rank not in stacks:
            without.add(rank)
    if not stacks:
        raise InputError(
            f"{folder} holds no stack a rank left: give a folder of `py-spy dump` outputs "
            "(rank<R>.txt or .json), of the ranks' logs holding their tracebacks (torchrun "
            "--log-dir), or the one `explorer doctor PID --save DIR` wrote"
        )
    return StackFolder(folder, stacks, tuple(sorted(without - set(stacks))), tuple(unreadable))


def save_stack(
    folder: Path,
    rank: int,
    pid: Optional[int],
    state: str,
    thread: Optional[dict],
    log: Optional[dict] = None,
    said: tuple[str, str] = ("unseen", ""),
) -> Path:
    """Write one rank's stack as ``rank<R>.stack.json`` (the frames must carry their source);
    ``thread`` None for a rank that had none, with what it was ``said`` to be instead."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SAVED_MARK).touch()
    path = folder / f"rank{rank}.stack.json"
    record = {
        "format": SAVED_FORMAT,
        "rank": rank,
        "pid": pid,
        "state": state,
        "thread": thread,
        "log": log or {},
        "said": list(said),
    }
    path.write_text(json.dumps(record, indent=1))
    return path


#: Written by every save: a folder holding it holds nothing but what a save wrote.
SAVED_MARK = ".explorer-doctor-save"


def clear_saved(folder: Path) -> None:
    """Make ``folder`` ready for a save: remove what an earlier save wrote there (its stacks and
    ``spec.json``); InputError when it holds anything else (never mix two jobs, never delete a
    file a save did not write)."""
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError(f"--save {folder}: that is a file; give a folder to write the stacks to")
    others = [p.name for p in folder.iterdir() if not _ours(p)]
    if others or (any(folder.iterdir()) and not (folder / SAVED_MARK).exists()):
        raise InputError(
            f"--save {folder}: it holds other files ({', '.join(sorted(others)[:3]) or 'no mark'}); "
            "give a new folder, or one an earlier --save wrote"
        )
    for path in folder.iterdir():
        path.unlink()


def _ours(path: Path) -> bool:
    return path.is_file() and (
        path.name in (SAVED_MARK, "spec.json")
        or (path.name.startswith("rank") and path.name.endswith(".stack.json"))
    )


def _files(folder: Path) -> list[Path]:
    """The folder's candidate files, in name order, at most a few levels down and at most
    ``_MAX_FILES`` of them (a folder given by mistake, a home directory, is not walked whole)."""
    if not folder.is_dir():
        return []
    out: list[Path] = []
    for root, dirs, files in os.walk(folder):
        depth = len(Path(root).relative_to(folder).parts)
        dirs[:] = sorted(dirs) if depth < _MAX_DEPTH - 1 else []
        for name in sorted(files):
            path = Path(root) / name
            if path.suffix == ".json" or path.suffix in _TEXT_SUFFIXES:
                out.append(path)
        if len(out) >= _MAX_FILES:
            break
    return sorted(out[:_MAX_FILES])


def _rank_of(relative: Path) -> Optional[int]:
    """The rank a file's name says (``rank3.txt``), or torchrun's layout (``attempt_0/3/stderr.log``)."""
    m = _RANK_IN_NAME.search(relative.name)
    if m is not None:
        return int(m.group("rank"))
    parts = relative.parts
    if len(parts) >= 3 and parts[-2].isdigit() and parts[-3].startswith("attempt_"):
        return int(parts[-2])
    return None


def _read_json(path: Path, rank: Optional[int]) -> list[SavedStack]:
    data = json.loads(path.read_text(errors="replace"))
    if isinstance(data, dict) and data.get("format") == SAVED_FORMAT:
        thread, log, said = data["thread"], data.get("log") or {}, data.get("said") or ()
        if not (thread is None or isinstance(thread, dict)) or not isinstance(log, dict):
            raise TypeError("thread")
        pid = data.get("pid")
        activity, note = (list(map(str, said)) + ["unseen", ""])[:2] if said else ("unseen", "")
        return [
            SavedStack(
                int(data["rank"]),
                thread,
                "saved",
                path.name,
                pid if isinstance(pid, int) else None,
                str(data.get("state") or ""),
                log=log,
                said=(activity if activity in ("gone", "unseen") else "unseen", note),
            )
        ]
    if isinstance(data, list) and rank is not None:  # py-spy dump --json: a list of threads
        threads = [t for t in data if isinstance(t, dict) and isinstance(t.get("frames"), list)]
        if not threads:
            return []
        pid = threads[0].get("pid")
        main = next(
            (
                t
                for t in threads
                if t.get("os_thread_id") == pid or t.get("thread_name") == "MainThread"
            ),
            threads[0],
        )
        return [SavedStack(rank, main, "py-spy", path.name, pid if isinstance(pid, int) else None)]
    return []


def _read_text(path: Path, rank: Optional[int]) -> list[SavedStack]:
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(max(0, size - _TAIL_BYTES))
        text = f.read().decode(errors="replace")
    out = []
    for r, own in split_by_rank(text, rank).items():
        stack = read_text_stack(own)
        if stack is not None:
            thread = _resolved(stack.thread, stack.command)
            out.append(SavedStack(r, thread, stack.form, path.name, stack.pid, "", stack.ended))
    return out


def _resolved(thread: dict, command: str) -> dict:
    """py-spy shortens paths (``train.py``, ``torch/nn/modules/module.py``): where the dump's
    command line names the script by a full path that still exists, its frames get that path
    back (so a sleep is told from a wait by its line); a library's frames get the path of the
    installed library (``/`` before it: the reader knows a library by ``/torch/``)."""
    scripts = {
        Path(a).name: a for a in command.split() if a.endswith(".py") and Path(a).is_absolute()
    }
    frames = []
    for f in thread.get("frames") or []:
        name = str(f.get("filename", ""))
        full = scripts.get(name)
        if full and Path(full).is_file():
            f = {**f, "filename": full}
        elif not name.startswith(("/", "<")) and name.split("/", 1)[0] in _LIBRARIES:
            f = {**f, "filename": _installed(name)}
        frames.append(f)
    return {**thread, "frames": frames}


#: The libraries whose frames py-spy shortens to their package path.
_LIBRARIES = ("torch", "deepspeed", "torch_xla", "explorer")


def _installed(name: str) -> str:
    """The full path of a library file py-spy shortened, where this interpreter has it; else
    the name under a ``/`` (still a library's path to the reader)."""
    for base in sys.path:
        candidate = Path(base or ".") / name
        if candidate.is_file():
            return str(candidate)
    return "/" + name


def _has_stack(tail: bytes, rank: Optional[int]) -> bool:
    own = split_by_rank(tail.decode(errors="replace"), rank).values()
    return any(read_text_stack(text) is not None for text in own)


__all__ = [
    "SAVED_FORMAT",
    "SAVED_MARK",
    "SavedStack",
    "StackFolder",
    "is_stack_folder",
    "read_stack_folder",
    "clear_saved",
    "save_stack",
]
