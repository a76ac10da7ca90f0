"""Python stacks a job left as text, read back into py-spy's JSON shape.

A hung job that is gone leaves stacks in three textual forms, all read here into the thread
dicts ``py-spy dump --json`` gives (``frames`` innermost first, each ``name``, ``filename``,
``line``, ``locals`` and, where the text shows it, the line's ``source``), so that one reader
(:func:`explorer.pipeline.analysis.stacks.read_stack`) serves live and saved stacks alike:

- ``py-spy dump`` (``--locals`` or not) saved by a person, one file per rank: ``Thread N
  (idle|active)`` then ``    func (file:line)``, with ``Arguments:``/``Locals:`` blocks;
- a Python traceback, the one a rank prints when its wait times out or its peer goes away
  (gloo: ``Timed out waiting 3000ms for recv operation``; innermost frame last);
- ``faulthandler``'s dump (``File "f", line N in func``, innermost first; every thread, the
  main thread is the one that started in ``<module>``).

torch's launchers put the rank before each line a rank prints (``[rank1]:``, and ``torchrun
--tee`` adds ``[default1]:``), so one console log holds every rank's stack:
:func:`split_by_rank` takes it apart. Pure: text in, dicts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

#: ``[default1]:[rank1]: text``: the prefixes torch's launchers and excepthook write.
_PREFIX = re.compile(r"^(?:\[default(?P<local>\d+)\]:)?(?:\[rank(?P<rank>\d+)\]:)?\s?(?P<text>.*)$")
_PYSPY_PROCESS = re.compile(r"^Process (?P<pid>\d+): (?P<cmd>.*)$")
_PYSPY_THREAD = re.compile(
    r"^Thread (?P<tid>0x[0-9A-Fa-f]+|\d+) \((?P<state>[^)]*)\)(?::\s*\"(?P<name>[^\"]*)\")?\s*$"
)
_PYSPY_FRAME = re.compile(r"^ {4}(?P<name>\S.*?) \((?P<file>[^()]+):(?P<line>\d+)\)\s*$")
_PYSPY_LOCAL = re.compile(r"^ {12}(?P<name>[^:\s]+): (?P<repr>.*)$")
_TB_START = "Traceback (most recent call last):"
_TB_FRAME = re.compile(r'^ {2}File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
_FH_THREAD = re.compile(
    r"^(?:Current thread|Thread) (?P<tid>0x[0-9a-fA-F]+) \(most recent call first\):"
)
_FH_FRAME = re.compile(r'^ {2}File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<name>.+)$')
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b.*$")


@dataclass(frozen=True)
class TextStack:
    """One rank's stack read from text: its main thread (py-spy's JSON shape) and how it ended.

    ``form``: ``py-spy`` (a dump of a live process: ``ended`` is ""), ``traceback`` (the
    exception that ended the process: ``ended`` is its last line) or ``faulthandler``.
    """

    thread: dict
    form: str
    pid: Optional[int] = None
    ended: str = ""
    command: str = ""  # py-spy's "Process N: <command line>"


def split_by_rank(text: str, default_rank: Optional[int] = None) -> dict[int, str]:
    """Each rank's own lines: the ones prefixed ``[rankN]:`` are rank N's (``[defaultN]:`` alone
    is the local rank's, which on one node is the rank), the others ``default_rank``'s (the file's
    own rank, where its name says it), else nobody's (a launcher's own lines)."""
    out: dict[int, list[str]] = {}
    for raw in text.splitlines():
        m = _PREFIX.match(raw)
        if m is None:  # the pattern matches every line; kept for the type checker
            continue
        named = m.group("rank") or m.group("local")
        rank = int(named) if named is not None else default_rank
        if rank is None:
            continue
        out.setdefault(rank, []).append(m.group("text") if named is not None else raw)
    return {rank: "\n".join(lines) for rank, lines in out.items()}


def read_text_stack(text: str) -> Optional[TextStack]:
    """The last stack the text holds (a later dump or traceback is the newer), or None."""
    lines = text.splitlines()
    found: list[tuple[int, TextStack]] = []
    for reader in (_last_pyspy, _last_traceback, _last_faulthandler):
        hit = reader(lines)
        if hit is not None:
            found.append(hit)
    return max(found, key=lambda h: h[0])[1] if found else None


def _last_pyspy(lines: list[str]) -> Optional[tuple[int, TextStack]]:
    """The main thread of the last ``py-spy dump`` in the text (the thread whose id is the pid)."""
    starts = [i for i, line in enumerate(lines) if _PYSPY_PROCESS.match(line)]
    if not starts:
        return None
    at = starts[-1]
    head = _PYSPY_PROCESS.match(lines[at])
    assert head is not None
    pid, command = int(head.group("pid")), head.group("cmd")
    threads: list[dict] = []
    for line in lines[at + 1 :]:
        head = _PYSPY_THREAD.match(line)
        if head is not None:
            tid = head.group("tid")
            threads.append(
                {
                    "os_thread_id": int(tid, 16) if tid.startswith("0x") else int(tid),
                    "thread_name": head.group("name") or "",
                    "active": head.group("state").startswith("active"),
                    "frames": [],
                }
            )
            continue
        frame = _PYSPY_FRAME.match(line)
        if frame is not None and threads:
            threads[-1]["frames"].append(_frame(frame))
            continue
        local = _PYSPY_LOCAL.match(line)
        if local is not None and threads and threads[-1]["frames"]:
            threads[-1]["frames"][-1]["locals"].append(
                {"name": local.group("name"), "repr": local.group("repr")}
            )
    if not threads:
        return None
    main = next(
        (t for t in threads if t["os_thread_id"] == pid or t["thread_name"] == "MainThread"),
        threads[0],
    )
    return at, TextStack(main, "py-spy", pid, command=command)


def _last_traceback(lines: list[str]) -> Optional[tuple[int, TextStack]]:
    """The last traceback's frames (innermost first, each with its source line) and its exception."""
    starts = [i for i, line in enumerate(lines) if line.strip() == _TB_START]
    if not starts:
        return None
    at = starts[-1]
    frames: list[dict] = []
    ended = ""
    for i in range(at + 1, len(lines)):
        line = lines[i]
        m = _TB_FRAME.match(line)
        if m is not None:
            frames.append(_frame(m))
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if nxt.startswith("    ") and not _TB_FRAME.match(nxt):
                frames[-1]["source"] = nxt.strip()
            continue
        if _EXCEPTION.match(line):
            ended = line.strip()
            break
    if not frames:
        return None
    thread = {"os_thread_id": None, "thread_name": "MainThread", "active": False}
    return at, TextStack({**thread, "frames": frames[::-1]}, "traceback", None, ended)


def _last_faulthandler(lines: list[str]) -> Optional[tuple[int, TextStack]]:
    """The main thread of the last faulthandler dump: the thread whose outermost frame is ``<module>``."""
    heads = [i for i, line in enumerate(lines) if _FH_THREAD.match(line)]
    if not heads:
        return None
    threads: list[tuple[int, list[dict]]] = []
    for i in heads:
        frames = []
        for line in lines[i + 1 :]:
            m = _FH_FRAME.match(line)
            if m is None:
                break
            frames.append(_frame(m))
        threads.append((i, frames))
    # one dump lists its threads one after another: the last dump's threads are the last run
    block = [threads[-1]]
    for i, frames in reversed(threads[:-1]):
        if i + len(frames) + 2 < block[0][0]:
            break
        block.insert(0, (i, frames))
    at, main = max(block, key=lambda t: _main_likeness(lines[t[0]], t[1]))
    if not main:
        return None
    thread = {"os_thread_id": None, "thread_name": "MainThread", "active": False, "frames": main}
    return at, TextStack(thread, "faulthandler")


def _main_likeness(head: str, frames: list[dict]) -> int:
    """How surely a faulthandler thread is the main one: it started in ``<module>`` (a deep stack
    is cut at 100 frames, so not always shown), it is the thread that dumped (a crash, a signal
    handler), it was not started by ``threading``."""
    outermost = frames[-1]["name"] if frames else ""
    return (
        4 * (outermost == "<module>")
        + 2 * head.startswith("Current thread")
        + (outermost not in ("_bootstrap", "_bootstrap_inner"))
    )


def _frame(m: re.Match) -> dict:
    return {
        "name": m.group("name").strip(),
        "filename": m.group("file"),
        "line": int(m.group("line")),
        "locals": [],
    }


__all__ = ["TextStack", "read_text_stack", "split_by_rank"]
