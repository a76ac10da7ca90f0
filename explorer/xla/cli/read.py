"""``explorer read`` on XLA artifacts: ``xla-run``'s table and sentences from what a run left behind.

Exit codes follow ``xla-run``: 0 when no new graph appeared after the warm-up steps, 1 when one
did (a recompile to look at), 2 for bad input (no artifacts, a corrupt file).
"""

from __future__ import annotations

import json
from pathlib import Path


def read(path: Path, json_out: bool) -> int:
    """Print the report (or JSON with ``kind: "xla"``) and return the exit code."""
    from explorer.xla.analysis.from_artifacts import read_artifacts
    from explorer.xla.cli.run import WARMUP_STEPS, report

    got = read_artifacts(path)
    if json_out:
        print(json.dumps(got.to_json(), indent=1), flush=True)
    else:
        print(f"read {path}: {got.artifacts.describe()}")
        if got.run.steps:
            print(report(got.run).split("\n", 1)[1])  # its first line names a device not known here
        for g in got.run.graphs if not got.run.steps else ():
            print(
                f"  compile {g.graph_hash}: {g.instructions} instructions, {g.num_parameters} "
                f"parameters ({g.hlo_path})"
            )
            if g.closest:
                print(f"    against {g.closest}: {g.diff_summary}")
        if got.metrics is not None:
            m = got.metrics
            print(
                f"metrics report: {m.counters.get('UncachedCompile', '?')} compile(s) "
                f"(UncachedCompile), {m.counters.get('CachedCompile', '?')} cache hit(s), CompileTime "
                f"{_ms(m.total_ms('CompileTime'))}, ExecuteTime {_ms(m.total_ms('ExecuteTime'))} in all"
            )
        for same in got.same_hash_different_text:
            print(
                f"same Graph Hash, different HLO: {same.graph_hash[:8]} at save-file lines "
                f"{same.lines} (steps {same.steps}): {same.diff_summary}"
            )
        print("these artifacts cannot answer:")
        for note in got.cannot_answer:
            print(f"  - {note}")
    late = any(s.new_graph and s.step >= WARMUP_STEPS for s in got.run.steps)
    return 1 if late or got.same_hash_different_text else 0


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f} ms"


__all__ = ["read"]
