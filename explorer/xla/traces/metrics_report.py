"""Read the text of ``torch_xla.debug.metrics.metrics_report()``.

The report is what most users paste into an issue. It holds run-wide totals only: counters
(``UncachedCompile``, ``CachedCompile``...) and metrics with their sample count and
accumulated value (``CompileTime``, ``ExecuteTime``). It cannot say which step compiled, only
how many compiles the whole process made, which is still a check on the other artifacts: a
debug log that shows fewer compiles than ``UncachedCompile`` is missing some.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from explorer.errors import InputError, excerpt

__all__ = ["MetricsReport", "looks_like_metrics", "parse_metrics_report", "duration_ms"]

_HEAD = re.compile(r"^(Metric|Counter):\s*(\S+)\s*$")
_FIELD = re.compile(r"^\s+(\w+):\s*(.*?)\s*$")
_UNIT = re.compile(r"(\d+(?:\.\d+)?)(ms|us|ns|s|m|h)(?![a-z])")
_UNIT_MS = {"h": 3.6e6, "m": 6e4, "s": 1e3, "ms": 1.0, "us": 1e-3, "ns": 1e-6}


@dataclass
class MetricsReport:
    """``counters[name]`` is an int; ``metrics[name]`` the metric's fields as printed."""

    counters: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, dict[str, str]] = field(default_factory=dict)

    def total_ms(self, name: str) -> float | None:
        """A time metric's accumulated value in ms (None if absent or not a duration)."""
        acc = self.metrics.get(name, {}).get("Accumulator")
        return duration_ms(acc) if acc else None

    def samples(self, name: str) -> int | None:
        value = self.metrics.get(name, {}).get("TotalSamples", "")
        return int(value) if value.isdigit() else None


#: More than any counter or time a real report holds (a year is 3.2e10 ms): past it, the report
#: was not written by torch_xla, and printing it as a count or a time would say nonsense.
MAX_COUNT, MAX_MS = 10**15, 1e13


def _count(name: str, value: str) -> int:
    if value.startswith("-") or len(value) > 16 or int(value) > MAX_COUNT:
        raise InputError(
            f"metrics report: counter {excerpt(name, 40)} is {excerpt(value, 24)}, not a count "
            "torch_xla writes (0 to 10^15): was the report edited or cut?"
        )
    return int(value)


def duration_ms(text: str) -> float | None:
    """torch_xla's ``01m02s345ms678.123us`` (or ``345ms``) as milliseconds (None: not a duration;
    InputError: more time than any run takes, which no torch_xla report says)."""
    parts = _UNIT.findall(text)
    if not parts or _UNIT.sub("", text).strip():
        return None
    total = sum(float(v) * _UNIT_MS[u] for v, u in parts)
    if not total <= MAX_MS:
        raise InputError(
            f"metrics report: the time {excerpt(text, 40)} is more than any run takes "
            f"({MAX_MS:.0e} ms): was the report edited or cut?"
        )
    return total


def looks_like_metrics(head: str) -> bool:
    """A cheap test: the first non-blank line is ``Metric: NAME`` or ``Counter: NAME``."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    return bool(_HEAD.match(first))


def parse_metrics_report(text: str) -> MetricsReport:
    """Every counter and metric in the report."""
    out = MetricsReport()
    kind, name = "", ""
    for line in text.splitlines():
        head = _HEAD.match(line)
        if head:
            kind, name = head.groups()
            if kind == "Metric":
                out.metrics[name] = {}
            continue
        f = _FIELD.match(line)
        if not f or not name:
            continue
        key, value = f.groups()
        if kind == "Counter" and key == "Value" and value.lstrip("-").isdigit():
            out.counters[name] = _count(name, value)
        elif kind == "Metric":
            out.metrics[name][key] = value
    return out
