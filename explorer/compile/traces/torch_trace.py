"""Read one ``TORCH_TRACE`` file (Dynamo's structured trace, what ``tlparse`` reads) into compile records.

Each line is a glog prefix (``V1124 09:59:29.548000 7965 torch/_dynamo/...py:249] ``, whose
number is the process id) and one JSON envelope: the ids (``frame_id``, ``frame_compile_id``,
``attempt``, ``compiled_autograd_id``, ``rank``), ``has_payload`` when tab-led payload lines
follow, and one record key. The records read here are ``dynamo_start`` (a compile begins; its
``stack`` names files by index into ``{"str": [name, index]}`` records), the ``artifact``
named ``recompile_reasons`` (every failed guard, one per cached variant tried: a JSON list, or a
string when there is one), ``dynamo_graph_break_reason``, the compile caches' answers
(``fx_graph_cache_hit|miss|bypass``, ``aotautograd_cache_*``), ``dynamo_cpp_guards_str`` (older
torch: ``dynamo_guards``) and ``compilation_metrics``. Every field is optional: torch 2.5-2.9
differ, and a job killed mid-write leaves a cut last line, which is noted, not fatal.

A trace with inductor's output code runs to gigabytes, most of it payload lines no record
read here needs. So the file is mapped, not read into memory, and one regular expression finds
the envelope lines (in C, skipping the payload lines between them); an envelope is decoded only
when its line names a record read here, and a payload is decoded only for those records. A job
of thousands of ranks is read this way once per rank, so this loop is the job's reading time.
Written from the format, no torch import.
"""

from __future__ import annotations

import json
import mmap
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from explorer import inputs
from explorer.compile.traces.records import PROBE_ARTIFACT, PROBE_RUN_ARTIFACT
from explorer.errors import InputError, excerpt

#: A line of a mapped file that is not a payload line: for an envelope, its process id (group 1)
#: and JSON (group 2); else the line (group 3). Nothing spans a newline. The lines after the first
#: are found by their newline: a literal the regular expression engine searches for fast, where a
#: ``^`` under ``re.MULTILINE`` is tried at every byte of the payloads.
_BODY = rb"(?:[IWEVDF]\d{4} [\d:.]+[^\S\n]+(\d+) [^\]\n]*\] (\{[^\n]*)|([^\t\n][^\n]*))"
_FIRST, _NEXT = re.compile(_BODY), re.compile(rb"\n" + _BODY)
#: The record keys :class:`_Reader` reads: an envelope whose first key (torch writes the record
#: key first) is none of these nor an id is not decoded.
_WANTED = frozenset(
    {
        "str",
        "compilation_metrics",
        "dynamo_start",
        "dynamo_cpp_guards_str",
        "dynamo_guards",
        "artifact",
    }
)
_RANK_IN_NAME = re.compile(r"_rank_(\d+)_")
_CACHE = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass)$")
_GUARD_LINE = re.compile(r"\+- ([A-Z_]+): (.*)$")
_META = {
    "rank",
    "frame_id",
    "frame_compile_id",
    "attempt",
    "compiled_autograd_id",
    "has_payload",
    "payload_filename",
}
#: Longest line kept; longer ones (inductor's output code in one payload line) are skipped whole.
MAX_LINE = 64 * 2**20
#: Largest gzipped trace read (decompressed, it is held in memory; a plain one is mapped).
MAX_GUNZIPPED = 2 * 2**30


@dataclass
class TraceCompile:
    """One compile of one frame as the trace tells it (fields absent from the trace stay None)."""

    compile_id: str
    function: Optional[str] = None
    reasons: list[str] = field(default_factory=list)
    failed: Optional[str] = None
    fail_reason: Optional[str] = None
    seconds: Optional[float] = None
    start_us: Optional[float] = None
    end_us: Optional[float] = None
    cache: list[str] = field(default_factory=list)
    guards: list[str] = field(default_factory=list)
    restart_reasons: list[str] = field(default_factory=list)
    metrics: bool = False


@dataclass(frozen=True)
class TraceBreak:
    """A graph break: ``reason`` the ``Graph Break Reason:`` text, ``where`` the user line it broke at."""

    compile_id: str
    reason: str
    where: str
    detail: str


@dataclass
class TorchTrace:
    """What one process's structured trace says about compiles (see the module docstring)."""

    path: str
    pid: Optional[int] = None
    rank: Optional[int] = None
    #: The rank the first record that names one says (a renamed log says another than its name).
    said_rank: Optional[int] = None
    compiles: list[TraceCompile] = field(default_factory=list)
    breaks: list[TraceBreak] = field(default_factory=list)
    #: ``compile-probe``'s own iteration records (:data:`PROBE_ARTIFACT`), as written.
    probe_records: list[Any] = field(default_factory=list)
    #: ``compile-probe``'s start and end of its run (:data:`PROBE_RUN_ARTIFACT`); None for one
    #: that cannot be read.
    probe_runs: list[Any] = field(default_factory=list)
    records: int = 0
    skipped: int = 0
    truncated: bool = False


def rank_in_name(name: str) -> Optional[int]:
    """The rank a log's file name gives (``..._rank_5_...``), None when it names none."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _compile_id(env: dict[str, Any]) -> Optional[str]:
    frame, attempt = env.get("frame_id"), env.get("frame_compile_id")
    if frame is None or attempt is None:
        return None
    ca = env.get("compiled_autograd_id")
    return f"!{ca}/{frame}/{attempt}" if ca is not None else f"{frame}/{attempt}"


def _record_key(env: dict[str, Any]) -> Optional[str]:
    return next((k for k in env if k not in _META), None)


class _Reader:
    """Folds envelopes and their payloads into a :class:`TorchTrace`."""

    def __init__(self, path: str) -> None:
        self.trace = TorchTrace(path)
        self.trace.rank = rank_in_name(Path(path).name)
        self.by_id: dict[str, TraceCompile] = {}
        self.strings: dict[int, str] = {}

    def compile(self, cid: str) -> TraceCompile:
        if cid not in self.by_id:
            self.by_id[cid] = TraceCompile(cid)
            self.trace.compiles.append(self.by_id[cid])
        return self.by_id[cid]

    def envelope(self, env: dict[str, Any], payload: Callable[[], str]) -> None:
        """One record; ``payload()`` decodes its payload lines (only the records that need it ask)."""
        key, cid = _record_key(env), _compile_id(env)
        value = env.get(key) if key else None
        if self.trace.said_rank is None and isinstance(env.get("rank"), int):
            self.trace.said_rank = env["rank"]
        if self.trace.rank is None and isinstance(env.get("rank"), int):
            self.trace.rank = env["rank"]
        if (
            key == "str"
            and isinstance(value, list)
            and len(value) == 2
            and isinstance(value[1], int)
        ):
            self.strings[value[1]] = str(value[0])
        elif key == "compilation_metrics" and isinstance(value, dict):
            self.metrics(value, cid)
        elif key == "artifact" and isinstance(value, dict) and value.get("name") == PROBE_ARTIFACT:
            try:
                self.trace.probe_records.append(json.loads(payload()))
            except ValueError:  # a cut or edited record: the iterations are then not the probe's
                self.trace.probe_records.append(None)
        elif (
            key == "artifact"
            and isinstance(value, dict)
            and value.get("name") == PROBE_RUN_ARTIFACT
        ):
            try:
                self.trace.probe_runs.append(json.loads(payload()))
            except ValueError:
                self.trace.probe_runs.append(None)
        elif cid is None:
            return
        elif key == "dynamo_start":
            if cid in self.by_id and self.by_id[cid].metrics:
                # the id's compile ended (its metrics came), so this is another compile that
                # reuses the id: Dynamo numbers anew after torch._dynamo.reset(), and a step
                # that resets compiled 0/0 four times, read as one compile
                del self.by_id[cid]
            stack = value.get("stack") if isinstance(value, dict) else None
            top = (
                stack[-1]
                if isinstance(stack, list) and stack and isinstance(stack[-1], dict)
                else {}
            )
            self.compile(cid).function = self.compile(cid).function or top.get("name")
        elif key in ("dynamo_cpp_guards_str", "dynamo_guards"):
            self.compile(cid).guards = _guards(payload())
        elif key == "artifact" and isinstance(value, dict):
            self.artifact(str(value.get("name")), cid, payload)
        elif key and _CACHE.match(key):
            self.compile(cid).cache.append(key)

    def artifact(self, name: str, cid: str, payload: Callable[[], str]) -> None:
        if name == "recompile_reasons":
            self.compile(cid).reasons = _reasons(payload())
        elif name == "dynamo_graph_break_reason":
            self.trace.breaks.append(_graph_break(cid, payload()))
        elif _CACHE.match(name):
            self.compile(cid).cache.append(name)

    def metrics(self, m: dict[str, Any], cid: Optional[str]) -> None:
        cid = str(m.get("compile_id") or cid or "?")
        c = self.compile(cid)
        c.metrics = True
        c.function = m.get("co_name") or c.function
        c.failed, c.fail_reason = m.get("fail_type"), m.get("fail_reason")
        c.seconds = _number(m.get("entire_frame_compile_time_s"))
        start = _number(m.get("start_time_us"))
        c.start_us = start if start is not None else _scaled(m.get("start_time"), 1e6)
        c.end_us = _number(m.get("end_time_us"))
        if c.end_us is None and c.start_us is not None and c.seconds is not None:
            c.end_us = c.start_us + c.seconds * 1e6
        if not c.reasons and isinstance(m.get("recompile_reason"), str):
            c.reasons = [m["recompile_reason"]]
        c.restart_reasons = sorted(str(r) for r in (m.get("restart_reasons") or ()))


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _scaled(value: Any, by: float) -> Optional[float]:
    number = _number(value)
    return None if number is None else number * by


def _reasons(payload: str) -> list[str]:
    """The failed guards of a recompile: a JSON list, a JSON string, or (older) plain text."""
    try:
        value = json.loads(payload)
    except ValueError:
        return [ln.strip() for ln in payload.splitlines() if ln.strip()]
    if isinstance(value, list):
        return [str(v) for v in value]
    return [str(value)] if value else []


def _graph_break(cid: str, payload: str) -> TraceBreak:
    lines = [ln.rstrip() for ln in payload.splitlines()]
    where = next(
        (ln.split(" at ", 1)[1] for ln in lines if ln.startswith("Graph break") and " at " in ln),
        "",
    )
    reason = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in lines
            if ln.strip().startswith("Graph Break Reason:")
        ),
        "",
    )
    if not reason:
        reason = next(
            (ln.strip() for ln in lines if ln.strip()), "graph break (no reason recorded)"
        )
    detail = "\n".join(
        dict.fromkeys(
            ln.strip() for ln in lines if ln.strip().startswith(("Explanation:", "Hint:"))
        )
    )
    return TraceBreak(cid, reason, where, detail.strip())


def _guards(payload: str) -> list[str]:
    """Guard expressions of a guard tree (``+- EQUALS_MATCH: L['s'].mode == 0   # source``)."""
    out = []
    for line in payload.splitlines():
        m = _GUARD_LINE.search(line)
        if m and m.group(1) != "GuardManager":
            out.append(m.group(2).split("  #", 1)[0].strip())
    return out


def _payload(buf: Any, start: int, stop: int) -> str:
    """The tab-led lines from ``start`` up to ``stop`` (or the first line that is not one), tab
    removed; an over-long line (inductor's output code) is left out."""
    lines = []
    for line in bytes(buf[start:stop]).split(b"\n"):
        if not line.startswith(b"\t"):
            break
        if len(line) <= MAX_LINE:
            lines.append(line[1:].rstrip(b"\r").decode("utf-8", "replace"))
    return "\n".join(lines)


def _wanted(envelope: bytes) -> bool:
    """Whether an envelope's JSON may hold a record read here, from its first key alone."""
    end = envelope.find(b'"', 2)
    key = envelope[2:end].decode("ascii", "replace") if envelope.startswith(b'{"') else ""
    return not key or key in _WANTED or key in _META or bool(_CACHE.match(key))


def _lines_of(buf: Any) -> Iterator[re.Match]:
    """The lines of ``buf`` that are not payload lines (see :data:`_NEXT`)."""
    first = _FIRST.match(buf)
    if first is not None:
        yield first
    yield from _NEXT.finditer(buf)


def _scan(buf: Any, reader: _Reader) -> None:
    """Every line of a mapped trace that is not a payload line, in order (see the module
    docstring): envelopes decoded when wanted, the others counted as skipped."""
    trace, size = reader.trace, len(buf)
    cut = size > 0 and buf[size - 1 : size] != b"\n"
    pending: Optional[tuple[dict[str, Any], int]] = None
    for m in _lines_of(buf):
        if pending is not None:
            env, start, stop = pending[0], pending[1], m.start()
            reader.envelope(env, lambda: _payload(buf, start, stop))
            pending = None
        last = cut and m.end() == size
        if m.group(2) is not None and not (
            trace.records and trace.rank is not None and not last and not _wanted(m.group(2))
        ):
            try:
                env = json.loads(m.group(2))
            except ValueError:
                env = None
            if isinstance(env, dict):
                trace.records += 1
                trace.pid = trace.pid if trace.pid is not None else int(m.group(1))
                pending = (env, m.end() + 1)
                continue
        elif m.group(2) is not None:
            trace.records += 1  # a record no reader here needs: not decoded
            continue
        trace.skipped += 1
        trace.truncated = last
    if pending is not None:
        env, start = pending
        reader.envelope(env, lambda: _payload(buf, start, size))
    if cut:  # torch ends every line it writes: a last line without its end was cut, payload or not
        trace.truncated = True


def read_torch_trace(path: str | Path) -> TorchTrace:
    """Every compile, guard failure, graph break and cache answer in one trace file (``.log``,
    or ``.log.gz`` as a kept trace is stored)."""
    reader = _Reader(str(path))
    if str(path).endswith(".gz"):
        data, cut = _gunzipped(path)
        _scan(data, reader)
        reader.trace.truncated |= cut  # the stream ended early, perhaps at a line's end
    else:
        _scan_mapped(path, reader)
    if reader.trace.records == 0:
        raise InputError(
            f"{excerpt(str(path))} holds no structured-trace record (a glog prefix then a JSON object "
            "per line): is it a file TORCH_TRACE=DIR wrote?"
        )
    return reader.trace


def _scan_mapped(path: str | Path, reader: _Reader) -> None:
    """Scan a plain trace mapped, not read: a trace with inductor's output code runs to gigabytes."""
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise InputError(f"{excerpt(str(path))}: cannot be read ({exc.strerror or exc})") from None
    with fh:
        try:
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):  # an empty file (or one that cannot be mapped): read it
            buf = fh.read()
        try:
            _scan(buf, reader)
        finally:
            if isinstance(buf, mmap.mmap):
                try:
                    buf.close()
                except BufferError:  # a match still held by an exception's traceback
                    pass


def _gunzipped(path: str | Path) -> tuple[bytes, bool]:
    """A gzipped trace, decompressed into memory (a stream cannot be mapped), at most
    :data:`MAX_GUNZIPPED` bytes, and whether its stream was cut short (read as a cut plain
    trace is); a damaged stream or a larger trace is one InputError."""
    try:
        return inputs.read_cut_gzip(str(path), "", MAX_GUNZIPPED)
    except InputError as exc:
        if "decompresses to more" not in str(exc):
            raise
        raise InputError(
            f"{excerpt(str(path))} decompresses to more than {MAX_GUNZIPPED / 2**30:.0f} GiB: "
            "gunzip it and read the plain file, which is mapped instead of held in memory"
        ) from None


__all__ = [
    "MAX_GUNZIPPED",
    "MAX_LINE",
    "TraceCompile",
    "TraceBreak",
    "TorchTrace",
    "rank_in_name",
    "read_torch_trace",
]
