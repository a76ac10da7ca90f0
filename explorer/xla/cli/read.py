"""``explorer read`` on XLA artifacts: ``xla-run``'s table and sentences from what a run left behind.

Exit codes follow ``xla-run``: 0 when no new graph appeared after the warm-up steps, 1 when one
did (a recompile to look at), 2 for bad input (no artifacts, a corrupt file); ``ok`` says the same.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from explorer.errors import InputError, excerpt
from explorer.inputs import read_json
from explorer.verdict import with_verdict
from explorer.xla.traces.records import RUN_FILE


def read(path: Path, json_out: bool) -> int:
    """Print the report (or JSON with ``kind: "xla"``) and return the exit code."""
    from explorer.xla.analysis.from_artifacts import read_artifacts
    from explorer.xla.cli.run import late_new_graph, report

    got = read_artifacts(path)
    record = _run_record(path)  # read once: both checks below hold the folder to it
    _record_agrees(record, got.run.to_json().get("steps") or [])
    recorded = _recorded_failure(record)  # what xla-run said of its own run comes first
    failure = recorded
    if failure is None and got.run.failure is not None:  # a cut log: no clean verdict
        failure = got.run.failure.to_dict()
    late = late_new_graph(got.run.steps)
    code = 1 if late or got.same_hash_different_text or failure is not None else 0
    if json_out:
        doc = got.to_json()
        if failure is not None:  # the run that wrote the folder failed: as xla-run said
            doc.update(failure=failure)
        print(json.dumps(with_verdict(doc, code), indent=1), flush=True)
    else:
        print(f"read {path}: {got.artifacts.describe()}")
        if recorded is not None:
            print(
                f"the run that wrote this folder failed ({recorded.get('kind')}): "
                f"{recorded.get('message')} (its {RUN_FILE}); the steps below are those it finished"
            )
        elif failure is not None:
            print(f"these artifacts do not hold the whole run: {failure.get('message')}")
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
        if got.cannot_answer:
            print("these artifacts cannot answer:")
        for note in got.cannot_answer:
            print(f"  - {note}")
    return code


def _run_record(path: Path) -> Optional[tuple[Path, Any]]:
    """The folder's ``run.json`` (its path and what it holds), None where there is none."""
    record = path / RUN_FILE if path.is_dir() else None
    if record is None or not record.is_file():
        return None
    return record, read_json(str(record), "")


def _recorded_failure(record: Optional[tuple[Path, Any]]) -> dict | None:
    """The failure ``xla-run --out`` recorded in the folder's ``run.json`` (None: none, or no such
    file). A folder of a run that failed at step 2 holds two good steps; read alone, they made a
    clean verdict of a failed run."""
    if record is None:
        return None
    path, doc = record
    failure = doc.get("failure") if isinstance(doc, dict) else None
    if failure is not None and not isinstance(failure, dict):
        raise InputError(
            f"{excerpt(str(path))}: its 'failure' is not what xla-run writes; was it edited?"
        )
    return failure


#: What a step of ``run.json`` and of the artifacts both hold as facts of the run (not words).
_FACTS = ("step", "compiled", "graph_hash", "compile_ms", "execute_ms", "num_parameters")


def _record_agrees(found: Optional[tuple[Path, Any]], steps: list[dict]) -> None:
    """The steps ``xla-run`` recorded in the folder's ``run.json`` are the steps its artifacts
    hold, fact for fact. A debug log swapped in from another run, a graph hash or a time edited
    in one file, read as a clean run of figures no run had (exit 0); they are refused instead."""
    if found is None:
        return
    record, doc = found
    said = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(said, list):
        return  # not xla-run's record of steps: _recorded_failure judges the rest of it
    if len(said) != len(steps):
        raise _disagree(record, f"it has {len(said)} step(s), the artifacts {len(steps)}")
    for mine, theirs in zip(said, steps):
        if not isinstance(mine, dict):
            raise _disagree(record, "a step of it is not an object")
        for key in _FACTS:
            if key in mine and mine[key] != theirs.get(key):
                raise _disagree(
                    record,
                    f"at step {theirs.get('step')} its {key} is {excerpt(str(mine[key]))} and the "
                    f"artifacts' is {excerpt(str(theirs.get(key)))}",
                )


def _disagree(record: Path, where: str) -> InputError:
    return InputError(
        f"{excerpt(str(record))} and the artifacts beside it disagree ({where}): one of them was "
        "edited or is another run's; read the folder as xla-run left it, or run it again"
    )


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:,.1f} ms"


__all__ = ["read"]
