"""``explorer read`` on a ``TORCH_TRACE`` folder: the ``compile-probe`` report for a job that already ran.

The text is ``compile-probe``'s report (iterations, compiles, graph breaks, the diagnosis,
each rank's verdict, where ranks differ, what the records cannot tell) followed by what
only a job's traces add: every failed guard of each recompile, the compile
caches' answers and the compile time.
``--json`` prints ``compile-probe --json``'s document with ``ranks``, ``divergence`` and
``notes``. Exit codes are ``compile-probe``'s: 0 nothing periodic or recompiling, 1 findings,
2 bad input.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from explorer.traces.compile.records import ProbeResult


def report(result: ProbeResult) -> str:
    """``compile-probe``'s report plus the trace's own findings (see the module docstring)."""
    from explorer.commands.compile_probe import _report

    lines = [_report(result)]
    for c in result.compiles:
        if len(c.reasons) > 1:
            lines.append(
                f"guards that failed before {c.compile_id} (one per cached variant tried):"
            )
            lines += [f"  {r.split('#', 1)[0].strip()}" for r in c.reasons]
    cache = Counter(name for c in result.compiles for name in c.cache)
    if cache:
        lines.append(
            "compile caches: " + ", ".join(f"{n} {name}" for name, n in sorted(cache.items()))
        )
    seconds = [c.seconds for c in result.compiles if c.seconds is not None]
    if seconds:
        lines.append(
            f"compile time: {sum(seconds):.3g} s over {len(seconds)} compiles (longest {max(seconds):.3g} s)"
        )
    return "\n".join(lines)


def read(path: Path, json_out: bool) -> int:
    """Read the job's traces at ``path``, print the report (or JSON), return compile-probe's exit code."""
    from explorer.traces.compile.from_trace import read_job

    result = read_job(path)
    if json_out:
        print(
            json.dumps({**result.to_json(), "source": "TORCH_TRACE", "path": str(path)}, indent=1),
            flush=True,
        )
    else:
        print(report(result), flush=True)
    d = result.diagnosis
    return 0 if d is None or d.cause == "steady" else 1


__all__ = ["report", "read"]
