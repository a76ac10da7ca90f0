"""Read a PyTorch profiler trace for what a ``TORCH_TRACE`` cannot say: iterations and which variant ran.

The structured trace logs compiles only: no iteration records, and nothing when a cached
variant runs. A profiler trace (``prof.export_chrome_trace`` or ``tensorboard_trace_handler``)
has both, when the profiler was given a ``schedule=``: every iteration is a ``ProfilerStep#N``
event (N counts ``prof.step()`` calls, so N is the iteration when ``prof.step()`` ends each
one), every run of a compiled frame a ``Torch-Compiled Region: F/A`` event naming its compile
id, every compile a ``_compile.compile_inner`` event, every frame entry a
``TorchDynamo Cache Lookup``. Times are microseconds from ``baseTimeNanoseconds``, so adding
it gives wall-clock time comparable with ``compilation_metrics``' ``start_time_us``.

Events carry the process id, which is also in every ``TORCH_TRACE`` line: that is how a
profiler file is paired with its rank's structured trace. Pure: no torch import.
"""

from __future__ import annotations

import bisect
import gzip
import math
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from explorer import inputs
from explorer.errors import InputError, excerpt

_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_REGION = "Torch-Compiled Region: "
_COMPILE = "_compile.compile_inner"
_LOOKUP = "TorchDynamo Cache Lookup"
#: Largest profiler trace read (it is parsed whole; a few active steps are a few MB).
MAX_PROFILE_BYTES = 512 * 2**20


@dataclass
class ProfiledStep:
    """One ``ProfilerStep#N``: its span and what Dynamo did inside it, in order."""

    step: int
    start_us: float
    dur_us: float
    regions: list[str] = field(default_factory=list)
    compiles: int = 0
    lookups: int = 0

    @property
    def end_us(self) -> float:
        return self.start_us + self.dur_us


@dataclass
class CompileProfile:
    """The steps of one process in one profiler trace; ``wall_clock`` when times are epoch microseconds."""

    path: str
    pid: Optional[int]
    rank: Optional[int]
    wall_clock: bool
    steps: list[ProfiledStep]


def _float(value: float) -> float:
    """``float(value)``, an integer too large for a float read as infinity.

    JSON integers have no size limit: ``float()`` raises OverflowError on one of a few hundred
    digits, where the same number written ``1e400`` is parsed as infinity and read on.
    """
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _pid(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _events(doc: Any, where: str) -> list[dict[str, Any]]:
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise InputError(
            f"{where} has no 'traceEvents' list: is it a profiler trace (prof.export_chrome_trace)?"
        )
    return [
        e
        for e in events
        if isinstance(e, dict)
        and e.get("ph") == "X"
        and isinstance(e.get("name"), str)
        and isinstance(e.get("ts"), (int, float))
        and isinstance(e.get("dur", 0), (int, float))
    ]


def read_compile_profile(path: str | Path) -> list[CompileProfile]:
    """The profiled steps of every process in the trace at ``path`` (one per pid; often one).

    A trace without ``ProfilerStep#N`` events yields nothing: it was recorded without a
    ``schedule=``, so it cannot tell iterations apart.
    """
    where = f"profiler trace {excerpt(str(path))}"
    doc = inputs.loads_json(inputs.read_text(str(path), "profiler trace", MAX_PROFILE_BYTES), where)
    events = _events(doc, where)
    base = doc.get("baseTimeNanoseconds")
    wall = isinstance(base, (int, float)) and not isinstance(base, bool) and base > 0
    offset = _float(base) / 1000.0 if wall else 0.0
    info = doc.get("distributedInfo")
    rank = (
        info.get("rank") if isinstance(info, dict) and isinstance(info.get("rank"), int) else None
    )
    steps: dict[Optional[int], list[ProfiledStep]] = {}
    for e in events:
        m = _STEP.match(e["name"])
        if m:
            steps.setdefault(_pid(e.get("pid")), []).append(
                ProfiledStep(int(m.group(1)), _float(e["ts"]) + offset, _float(e.get("dur", 0.0)))
            )
    profiles = []
    for pid, found in steps.items():
        found.sort(key=lambda s: s.start_us)
        _fill(found, [e for e in events if _pid(e.get("pid")) == pid], offset)
        profiles.append(CompileProfile(str(path), pid, rank, wall, found))
    return profiles


def _fill(steps: list[ProfiledStep], events: list[dict[str, Any]], offset: float) -> None:
    """Put each compiled-region, compile and cache-lookup event into the step that contains it."""
    starts = [s.start_us for s in steps]
    for e in sorted(events, key=lambda e: e["ts"]):
        name = e["name"]
        if not (name.startswith(_REGION) or name.startswith(_COMPILE) or name == _LOOKUP):
            continue
        ts = _float(e["ts"]) + offset
        i = bisect.bisect_right(starts, ts) - 1
        if i < 0 or ts > steps[i].end_us:
            continue
        if name.startswith(_REGION):
            steps[i].regions.append(name[len(_REGION) :].strip())
        elif name.startswith(_COMPILE):
            steps[i].compiles += 1
        else:
            steps[i].lookups += 1


def looks_like_profile(path: Path, head: int = 4096) -> bool:
    """Cheap: a ``.json``/``.json.gz`` file whose first bytes look like a Chrome trace."""
    name = path.name
    if not (name.endswith(".json") or name.endswith(".json.gz")):
        return False
    try:
        if name.endswith(".gz"):
            with gzip.open(path, "rb") as fh:
                data = fh.read(head)
        else:
            with open(path, "rb") as fh:
                data = fh.read(head)
    except (OSError, EOFError, zlib.error):
        return False
    return b'"traceEvents"' in data or b'"schemaVersion"' in data or b'"deviceProperties"' in data


__all__ = [
    "MAX_PROFILE_BYTES",
    "ProfiledStep",
    "CompileProfile",
    "read_compile_profile",
    "looks_like_profile",
]
