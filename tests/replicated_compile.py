"""A TORCH_TRACE folder of hundreds of ranks made from a real two-rank recording, outliers planted.

:func:`explorer.compile.runtime.example_job.record` runs the ``diverge`` job under real
``torch.compile`` with ``TORCH_TRACE`` set: rank 0 compiles its forward once, rank 1 recompiles
it (``0/1``, a size guard) when its batch grows. :func:`replicate` writes a job of ``ranks``
logs from those two: every rank a copy of rank 0's log, the ``outliers`` copies of rank 1's,
each renamed as torch names its logs (``dedicated_log_torch_trace_rank_<R>_<suffix>.log``) and
with its records' ``rank`` and its glog lines' process id rewritten, byte for byte otherwise.
The copies are made by text (each log split once at its rank and pid fields), so 4,096 ranks
take seconds, not a recording each.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

#: The fields rewritten in a copy: a record's rank, a glog line's process id.
_FIELDS = {
    "pid": re.compile(rb"^[IWEVDF]\d{4} [\d:.]+ +(\d+) ", re.M),
    "rank": re.compile(rb'^[^\t\n][^\n]*?"rank": (\d+)', re.M),
}


def template(log: Path) -> tuple[list[bytes], list[str]]:
    """A log cut at its rank and pid fields: the pieces between them, and which field each cut is."""
    data = log.read_bytes()
    cuts = sorted(
        (m.start(1), m.end(1), name) for name, rx in _FIELDS.items() for m in rx.finditer(data)
    )
    pieces, fields, at = [], [], 0
    for start, end, name in cuts:
        pieces.append(data[at:start])
        fields.append(name)
        at = end
    pieces.append(data[at:])
    return pieces, fields


def copy_of(tpl: tuple[list[bytes], list[str]], rank: int) -> bytes:
    """The template's log as rank ``rank`` would have written it (its pid 100000 + rank)."""
    pieces, fields = tpl
    values = {"rank": str(rank).encode(), "pid": str(100000 + rank).encode()}
    out = [pieces[0]]
    for name, piece in zip(fields, pieces[1:]):
        out += [values[name], piece]
    return b"".join(out)


def log_name(rank: int) -> str:
    return f"dedicated_log_torch_trace_rank_{rank}_r{rank:05d}x.log"


def replicate(recorded: Path, out: Path, ranks: int, outliers: Iterable[int] = ()) -> Path:
    """Write ``ranks`` logs into ``out`` from the recording's two (see the module docstring)."""
    logs = recorded / "torch_trace"
    plain = template(next(logs.glob("dedicated_log_torch_trace_rank_0_*.log")))
    odd = template(next(logs.glob("dedicated_log_torch_trace_rank_1_*.log")))
    planted = set(outliers)
    out.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):
        (out / log_name(r)).write_bytes(copy_of(odd if r in planted else plain, r))
    return out


__all__ = ["copy_of", "log_name", "replicate", "template"]
