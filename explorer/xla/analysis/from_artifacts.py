"""Rebuild a run's per-step story from what torch_xla left behind, and say what it cannot tell.

``explorer xla-run`` knows where each step starts because its child reports it, and keeps those
reports in its folder (``messages.jsonl``, written as they come): a folder that holds them is
split where the run split it, so every step reads as ``xla-run`` said it, and a run stopped
early reads as the steps it finished, with no clean verdict. Artifacts without them (a user's
own ``XLA_FLAGS`` run, an older folder) do not say where steps start: steps are then recovered
from the syncs themselves. Every execution names the
Python frames that triggered it; the training loop syncs from one line many times, so the *step
sync* is the site of most user syncs (``torch_xla.sync``/``mark_step``; a tie goes to the later
site), every execution from that site closes a step, and what ran before the first of them (up
to the last execution before it) is setup. Within that, the join of graphs to HLO and the "new graph: yes/no, because
..." sentences are exactly those of :mod:`explorer.xla.analysis.assemble`, so a run read back
gets the verdicts ``xla-run`` gave it.

Which artifact answers what:

- debug log: steps, compiles vs cache hits, torch_xla's cause, graph hashes, parameter counts;
- save file: the HLO of every execution with its hash (steps too, when there is no debug log,
  but then a first sighting is taken to be the compile);
- dumps: the HLO of every compile, in compile order (joined to the debug log's compiles);
- metrics report: run-wide totals only (compile count and time), a cross-check;
- the run's messages: where each step begins in the debug log, its times, the device, its end.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from explorer import inputs
from explorer.errors import InputError
from explorer.failure import Failure, FailureKind
from explorer.xla.analysis.assemble import _explain, _graphs, _steps, dumped_modules
from explorer.xla.analysis.same_hash import SameHash, find_same_hash
from explorer.xla.hlo import Module, read_modules
from explorer.xla.traces.artifacts import XlaArtifacts, find_artifacts
from explorer.xla.traces.debuglog import DebugEvent, cut_short, parse_debug, slice_events
from explorer.xla.traces.metrics_report import MetricsReport, parse_metrics_report
from explorer.xla.traces.records import (
    CONFIG_FILE,
    MESSAGES_FILE,
    METRICS_FILE,
    RUN_FILE,
    Graph,
    XlaRun,
)
from explorer.xla.traces.savefile import SaveBlock, parse_save_file

__all__ = ["ArtifactRead", "SameHash", "read_artifacts", "sync_site"]  # SameHash re-exported

_USER_SYNC = ("sync", "mark_step")


@dataclass
class ArtifactRead:
    """The rebuilt run plus what the artifacts could not answer and where each answer came from."""

    run: XlaRun
    artifacts: XlaArtifacts
    step_site: str = ""
    cannot_answer: list[str] = field(default_factory=list)
    same_hash_different_text: list[SameHash] = field(default_factory=list)
    metrics: Optional[MetricsReport] = None

    def to_json(self) -> dict[str, Any]:
        """``xla-run``'s document plus ``kind``, the sources and the unanswerable questions."""
        return {
            "kind": "xla",
            "source": self.artifacts.root,
            "artifacts": {k: _files(self.artifacts, k) for k in self.artifacts.kinds},
            "step_site": self.step_site,
            **self.run.to_json(),
            "same_hash_different_text": [s.to_json() for s in self.same_hash_different_text],
            "cannot_answer": self.cannot_answer,
        }


def _files(found: XlaArtifacts, kind: str) -> list[str]:
    return list(getattr(found, f"{kind}_files"))


def sync_site(frames: list[str]) -> str:
    """The first frame outside torch_xla itself: the user's line that synced."""
    for f in frames:
        if "/torch_xla/" not in f and not f.startswith(".."):
            return f
    return frames[0] if frames else ""


def _split(events: list[DebugEvent]) -> tuple[str, list[DebugEvent], list[list[DebugEvent]], int]:
    """(step site, setup events, events per step, executions after the last step)."""
    execs = [e for e in events if e.kind == "execute"]
    if not execs:
        return "", list(events), [], 0
    user = [e for e in execs if any(w in e.cause for w in _USER_SYNC)] or execs
    sites = [sync_site(e.frames) for e in user]
    counts = Counter(sites)
    last = {s: k for k, s in enumerate(sites)}
    site = max(counts, key=lambda s: (counts[s], last[s]))
    closes = [
        k for k, e in enumerate(events) if e.kind == "execute" and sync_site(e.frames) == site
    ]
    first = closes[0]
    before = [k for k in range(first) if events[k].kind == "execute"]
    setup_end = before[-1] + 1 if before else 0
    per_step, start = [], setup_end
    for k in closes:
        per_step.append(events[start : k + 1])
        start = k + 1
    trailing = sum(1 for e in events[start:] if e.kind == "execute")
    return site, events[:setup_end], per_step, trailing


def _save_events(blocks: list[SaveBlock]) -> list[DebugEvent]:
    """Executions from the save file; a hash's first sighting is taken to be its compile."""
    seen: set[str] = set()
    out: list[DebugEvent] = []
    for b in blocks:
        if not b.graph_hash:
            continue
        inputs_ = b.module.parameter_count if b.module is not None else None
        cause = "user torch_xla.sync" if b.frames and "sync" in b.frames[0] else ""
        if b.graph_hash not in seen:
            seen.add(b.graph_hash)
            out.append(DebugEvent("compile", "", b.graph_hash, inputs_, None, list(b.frames)))
        out.append(DebugEvent("execute", cause, b.graph_hash, inputs_, None, list(b.frames)))
    return out


def _read(path: str, what: str) -> str:
    return inputs.read_text(path, what)


def _one(paths: list[str], what: str, notes: list[str]) -> Optional[str]:
    if len(paths) > 1:
        notes.append(
            f"{len(paths)} {what}s found; read {os.path.basename(paths[0])} only "
            f"(one process or device ordinal per file): point at one file to read another"
        )
    return paths[0] if paths else None


def read_artifacts(path: Path, threshold: float = 0.8) -> ArtifactRead:
    """The run as far as the artifacts at ``path`` tell it (InputError if there are none)."""
    found = find_artifacts(path)
    if not found.kinds:
        raise InputError(
            f"{path} holds no XLA artifacts: give an --xla_dump_to folder, an XLA_SAVE_TENSORS_FILE, "
            "a PT_XLA_DEBUG_FILE or a metrics_report() text (or a folder of them)"
        )
    notes: list[str] = []
    run = XlaRun(label=f"read {path}", device={"pjrt_device": "?", "devices": "?"})
    out = ArtifactRead(run, found, cannot_answer=notes)
    debug_path = _one(found.debug_files, "debug log", notes)
    save_path = _one(found.save_files, "save file", notes)
    blocks = parse_save_file(_read(save_path, "save file"), save_path) if save_path else []
    events: list[DebugEvent] = []
    debug_text = ""
    if debug_path:
        debug_text = _read(debug_path, "debug log")
        events = parse_debug(debug_text)
        if not events:
            raise InputError(
                f"{debug_path} has no 'Compilation/Execution Analysis' block with a graph hash: "
                "it is not a PT_XLA_DEBUG_LEVEL=2 log, or it is empty"
            )
        run.failure = _cut_log(debug_path, debug_text)
    elif blocks:
        events = _save_events(blocks)
        notes.append(
            "compiled or cached: no debug log, so the first execution of each graph hash is taken "
            "to be its compile (a graph evicted from the cache and compiled again is not seen); "
            "torch_xla's own compile cause is not known"
        )
    dump_dir = os.path.dirname(found.dump_files[0]) if found.dump_files else ""
    executions: list[tuple[int, str]] = []
    marked = _run_markers(path, debug_text) if debug_text and path.is_dir() else None
    if events:
        if marked is not None:  # the run's own step markers: its split, not a guess
            setup, per_step, step_msgs, finished, device, said_error = marked
            out.step_site, trailing = "the run's own step markers", 0
            run.device = device or run.device
            if not finished and run.failure is None:
                run.failure = _ended_early(step_msgs, said_error)
        else:
            out.step_site, setup, per_step, trailing = _split(events)
            step_msgs = None
        executions = [(-1, e.graph_hash) for e in setup if e.kind == "execute"] + [
            (i, e.graph_hash) for i, evs in enumerate(per_step) for e in evs if e.kind == "execute"
        ]
        modules = _graphs(run, setup, per_step, dump_dir, load=_first_module)
        _attach_save_modules(run, modules, blocks, save_path or "")
        msgs = (
            step_msgs
            if step_msgs is not None
            else [
                {
                    "step": i,
                    "uncached": sum(1 for e in evs if e.kind == "compile"),
                    "cached": 0,
                    "compile_ms": None,
                    "execute_ms": None,
                    "wall_ms": None,
                }
                for i, evs in enumerate(per_step)
            ]
        )
        _steps(run, msgs, per_step)
        _explain(run, modules, threshold)
        run.modules = modules
        if trailing:
            notes.append(
                f"{trailing} execution(s) after the last step's sync ({out.step_site}) are not a step"
            )
        if step_msgs is None:
            notes.append(
                f"where steps begin: the run's own markers are not in these artifacts; a step is one sync "
                f"from {out.step_site or '?'} (the line most user syncs came from), earlier executions are setup"
            )
        if run.failure is None:
            run.failure = _dumps_against_log(dump_dir, events)
        if run.failure is None:
            run.failure = _never_ended(path)
    else:
        _dumps_only(run, found.dump_files, threshold, notes)
    out.same_hash_different_text = find_same_hash(run, blocks, executions)
    if not found.dump_files and not blocks:
        notes.append(
            "what changed between graphs: no HLO (no --xla_dump_to dumps, no XLA_SAVE_TENSORS_FILE), "
            "so new graphs are named by hash only"
        )
    metrics_path = _one(found.metrics_files, "metrics report", notes)
    if metrics_path:
        out.metrics = parse_metrics_report(_read(metrics_path, "metrics report"))
        _check_metrics(out, events)
    if marked is None:  # the run's own messages carry both
        notes.append(
            "per-step compile and execute times: torch_xla writes none to these artifacts"
            + (
                " (the metrics report holds run-wide totals only)"
                if out.metrics
                else " (a metrics report would give run-wide totals)"
            )
        )
        notes.append(
            "device and wrapper: not recorded in these artifacts; the live tensors at each sync: "
            "not recorded either (run under `explorer xla-run --live-report` to see them)"
        )
    return out


#: What a reader can still say when the log does not hold the whole run.
_UNKNOWN_AFTER = (
    "the steps before it are read, and what came after is unknown (it may be the recompile), "
    "so no verdict of 'no new graph' is given"
)


def _cut_log(path: str, text: str) -> Optional[Failure]:
    """A failure when the debug log was cut while being written (see ``cut_short``)."""
    why = cut_short(text)
    if why is None:
        return None
    return Failure(
        FailureKind.UNFINISHED,
        f"{path} {why} (the run stopped while writing it, or the file was cut): {_UNKNOWN_AFTER}",
    )


def _dumps_against_log(dump_dir: str, events: list[DebugEvent]) -> Optional[Failure]:
    """A failure when the dump folder holds another count of compiled graphs than the log
    compiled. More: the log stops early (cut at a block's end), or the dumps are of more than
    this run. Fewer: a dump was deleted or never written, and the dumps, paired with the
    compiles in order, no longer say which graph each compile made (a folder with its first
    dump deleted read every graph as "? instructions", exit 0)."""
    if not dump_dir:
        return None
    dumped = len(dumped_modules(dump_dir))
    compiled = sum(1 for e in events if e.kind == "compile")
    if dumped > compiled:
        return Failure(
            FailureKind.UNFINISHED,
            f"the dumps hold {dumped} compiled graphs and the debug log names {compiled} "
            f"compiles: the log stops early, or the dumps are of more than this run: "
            f"{_UNKNOWN_AFTER}",
        )
    if dumped < compiled:
        return Failure(
            FailureKind.UNFINISHED,
            f"the debug log names {compiled} compiles and the dumps hold {dumped} compiled "
            "graphs: a dump is missing (deleted, or never written), so which graph each compile "
            "made cannot be read from them; no verdict of 'no new graph' is given",
        )
    return None


def _run_markers(
    path: Path, text: str
) -> Optional[
    tuple[list[DebugEvent], list[list[DebugEvent]], list[dict], bool, dict, Optional[str]]
]:
    """The debug log split at the run's own step markers (:data:`MESSAGES_FILE`, what
    ``assemble`` splits it at for ``xla-run``): the setup's events, each step's, the step
    messages, whether the run reached its end, the device it named and the error its child
    reported (None: none); None when the folder
    holds no such file or its markers do not fit this log (then the syncs are read instead).

    A run stopped mid-step has its last step's events after its last marker: they are kept as
    one more step, as ``assemble`` keeps a failing step's."""
    record = path / MESSAGES_FILE
    if not record.is_file():
        return None
    raw = inputs.read_text(str(record), "")
    msgs: list[dict] = []
    lines = raw.splitlines()
    for k, line in enumerate(lines):
        try:
            msg = json.loads(line)
        except ValueError:
            if k == len(lines) - 1 and not raw.endswith("\n"):
                break  # the run was stopped while writing its last message
            raise InputError(
                f"{record} line {k + 1} is not a message the run wrote: was it edited?"
            ) from None
        if not isinstance(msg, dict) or not isinstance(msg.get("event"), str):
            raise InputError(
                f"{record} line {k + 1} is not a message the run wrote: was it edited?"
            )
        msgs.append(msg)
    setup = next((m for m in msgs if m["event"] == "setup"), None)
    steps = [m for m in msgs if m["event"] == "step"]
    said = [m.get("debug_offset") for m in ([setup] if setup else []) + steps]
    ints = [o for o in said if isinstance(o, int) and not isinstance(o, bool)]
    size = len(text.encode("utf-8"))
    if setup is None or len(ints) != len(said) or not all(0 <= o <= size for o in ints):
        return None  # not this log's markers
    if any(a > b for a, b in zip(ints, ints[1:])):
        return None
    before, per_step = slice_events(text, ints)
    finished = any(m["event"] == "done" for m in msgs)
    if not finished:
        tail = parse_debug(text.encode("utf-8")[ints[-1] :].decode("utf-8", "replace"))
        if tail:
            per_step.append(tail)
    device = setup.get("device")
    error = next((m for m in msgs if m["event"] in ("error", "input_error")), None)
    said = str(error.get("message", "")) if error is not None else None
    return before, per_step, steps, finished, device if isinstance(device, dict) else {}, said


def _ended_early(step_msgs: list[dict], error: Optional[str]) -> Failure:
    """Why a run's messages end before its end: the error its child reported, or a cut."""
    if error is not None:
        return Failure(
            FailureKind.EXCEPTION,
            f"step {len(step_msgs)}: {error} (the run's last message); the steps below are "
            "those it finished",
            step=len(step_msgs),
        )
    return Failure(
        FailureKind.UNFINISHED,
        f"the run's messages ({MESSAGES_FILE}) end after {len(step_msgs)} step(s) without its "
        f"end (interrupted or killed): {_UNKNOWN_AFTER}",
    )


def _never_ended(path: Path) -> Optional[Failure]:
    """A failure when ``path`` is the folder of an explorer XLA run that never reached its end.

    The run writes its ``config.json`` before its child starts, and the child writes the
    metrics report last, after its final step; ``xla-run`` then writes ``run.json``. A run
    interrupted or killed between the two leaves a log that may end cleanly on a block (so
    :func:`_cut_log` finds nothing) and as many dumps as compiles, and its steps read as a
    whole run with no new graph: a clean verdict of a run cut before its recompile.
    """
    config = path / CONFIG_FILE if path.is_dir() else None
    if config is None or not config.is_file() or (path / METRICS_FILE).is_file():
        return None
    if (path / RUN_FILE).is_file():
        return None  # xla-run wrote its record: a failure it saw is read from there
    try:
        asked = inputs.read_json(str(config), "")
    except InputError:
        return None  # not explorer's (or edited): the artifacts speak alone
    if not isinstance(asked, dict) or asked.get("capture") is False:
        return None  # nothing was captured, so no report was to be written
    steps = asked.get("steps")
    said = f"asks for {steps} step(s)" if isinstance(steps, int) else "is there"
    return Failure(
        FailureKind.UNFINISHED,
        f"the run that wrote {path} did not reach its end: its {CONFIG_FILE} {said}, and the "
        f"{METRICS_FILE} it writes after its last step is not there (interrupted, killed or "
        f"failed): {_UNKNOWN_AFTER}",
    )


def _first_module(path: str) -> Module:
    """A dump's module; a corrupt dump is bad input (exit 2), not a silently missing graph."""
    return read_modules(path)[0]


def _attach_save_modules(
    run: XlaRun, modules: dict[str, Module], blocks: list[SaveBlock], save_path: str
) -> None:
    """Graphs the dumps did not cover take their HLO from the save file's first block of that hash."""
    first: dict[str, SaveBlock] = {}
    for b in blocks:
        if b.module is not None and b.graph_hash:
            first.setdefault(b.graph_hash, b)
    for g in run.graphs:
        b = first.get(g.graph_hash)
        if g.graph_hash in modules or b is None or b.module is None:
            continue
        if g.num_parameters is not None and b.module.parameter_count != g.num_parameters:
            continue
        modules[g.graph_hash] = b.module
        g.module_name, g.instructions = b.module.name, b.module.instruction_count
        g.hlo_path = f"{save_path}:{b.line}"
        g.parameter_shapes = [p.shape for p in b.module.entry.parameters]


def _dumps_only(run: XlaRun, files: list[str], threshold: float, notes: list[str]) -> None:
    """Only dumps: one graph per compile, named by module file; no steps, no hashes."""
    if not files:
        notes.append(
            "steps, graphs and causes: a metrics report alone holds only totals; add the debug log, "
            "save file or dumps"
        )
        return
    modules: dict[str, Module] = {}
    for f in files:
        module = _first_module(f)
        key = "#" + os.path.basename(f).split(".")[0].split("_")[-1]
        modules[key] = module
        run.graphs.append(
            Graph(
                key,
                -1,
                num_parameters=module.parameter_count,
                instructions=module.instruction_count,
                module_name=module.name,
                hlo_path=f,
                parameter_shapes=[p.shape for p in module.entry.parameters],
            )
        )
    _explain(run, modules, threshold)
    run.modules = modules
    notes.append(
        "steps and graph hashes: dumps hold one module per compile, not when it ran or under which "
        "hash; graphs are named by dump file, in compile order"
    )


def _check_metrics(out: ArtifactRead, events: list[DebugEvent]) -> None:
    m = out.metrics
    assert m is not None
    compiles = Counter(e.kind for e in events)["compile"]
    uncached = m.counters.get("UncachedCompile")
    total = m.total_ms("CompileTime")
    if uncached is not None and events and uncached != compiles:
        out.cannot_answer.append(
            f"the metrics report counts {uncached} compile(s) (UncachedCompile) but the other "
            f"artifacts show {compiles}: they do not cover the whole process"
        )
    if total is not None:
        out.run.device["compile_ms_total"] = round(total, 3)
        out.run.device["compiles_total"] = m.samples("CompileTime")
    exe = m.total_ms("ExecuteTime")
    if exe is not None:
        out.run.device["execute_ms_total"] = round(exe, 3)
