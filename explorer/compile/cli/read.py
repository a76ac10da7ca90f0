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
from pathlib import Path

from explorer.compile.printout import trace_report


def read(path: Path, json_out: bool) -> int:
    """Read the job's traces at ``path``, print the report (or JSON), return compile-probe's exit code."""
    from explorer.compile.analysis.from_trace import read_job

    result = read_job(path)
    if json_out:
        print(
            json.dumps({**result.to_json(), "source": "TORCH_TRACE", "path": str(path)}, indent=1),
            flush=True,
        )
    else:
        print(trace_report(result), flush=True)
    d = result.diagnosis
    return 0 if d is None or d.cause == "steady" else 1


__all__ = ["read"]
