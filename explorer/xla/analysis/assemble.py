"""Join the child's messages, torch_xla's debug blocks and the HLO dumps into one :class:`XlaRun`.

The join is by graph hash: the debug file names the hash of every compile and every
execution, and the k-th compile block describes the k-th ``SyncTensorsGraph`` module XLA
dumped (both are written once per compile, in order, by the same thread). The join is checked
against the parameter count the debug block states; a module that does not agree is left
out rather than attached to the wrong graph.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Any, Callable, Optional

from explorer.xla.analysis.explain import cached_sentence, closest, new_graph_sentence, profile
from explorer.xla.hlo import Module, diff_modules, near_duplicate_groups, read_modules
from explorer.xla.traces.debuglog import DebugEvent, slice_events
from explorer.xla.traces.records import ChildResult, Graph, Step, XlaRun

_MODULE_NUMBER = re.compile(r"module_(\d+)\.")


def dumped_modules(dump_dir: str) -> list[str]:
    """The before-optimization dumps in compile order (XLA numbers modules as it creates them)."""
    files = glob.glob(os.path.join(dump_dir, "module_*.before_optimizations.txt"))
    return sorted(files, key=_module_number)


def _module_number(path: str) -> int:
    m = _MODULE_NUMBER.search(os.path.basename(path))
    if m is None:  # the glob above matched a name XLA does not write
        raise ValueError(f"{path}: not an XLA module dump (module_<number>.<name>...)")
    return int(m.group(1))


def _read_debug(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def assemble(child: ChildResult, label: str, threshold: float = 0.8) -> XlaRun:
    """The run's records; with capture off, steps carry wall time only."""
    msgs = child.messages
    setup: dict[str, Any] = next((m for m in msgs if m["event"] == "setup"), {})
    step_msgs = [m for m in msgs if m["event"] == "step"]
    run = XlaRun(
        label=label,
        device=setup.get("device", {}),
        failure=child.failure,
        out_dir=child.out_dir,
        setup_ms=setup.get("setup_ms", 0.0),
        child_output=child.output,
    )
    text = _read_debug(child.debug_path)
    offsets = (
        [setup["debug_offset"]] + [m.get("debug_offset", 0) for m in step_msgs] if setup else []
    )
    if text and setup:
        setup_events, per_step = slice_events(text, offsets)
        if child.failure is not None:  # what the failing step managed to log
            from explorer.xla.traces.debuglog import parse_debug

            tail = text.encode("utf-8")[offsets[-1] :].decode("utf-8", "replace")
            per_step.append(parse_debug(tail))
    else:
        setup_events, per_step = [], []
    modules = _graphs(run, setup_events, per_step, child.dump_dir)
    _steps(run, step_msgs, per_step)
    if text:
        _explain(run, modules, threshold)
    run.modules = modules
    return run


def _graphs(
    run: XlaRun,
    setup: list[DebugEvent],
    per_step: list[list[DebugEvent]],
    dump_dir: str,
    load: Optional[Callable[[str], Module]] = None,
) -> dict[str, Module]:
    """Graphs in compile order, joined to the k-th dump; ``load`` reads one dump (errors raise)."""
    files = dumped_modules(dump_dir) if dump_dir else []
    compiles = [(-1, e) for e in setup if e.kind == "compile"]
    compiles += [(i, e) for i, events in enumerate(per_step) for e in events if e.kind == "compile"]
    modules: dict[str, Module] = {}
    for k, (step, event) in enumerate(compiles):
        if run.graph(event.graph_hash) is not None:
            continue
        g = Graph(
            event.graph_hash,
            step,
            xla_cause=event.cause,
            frames=event.frames,
            num_parameters=event.inputs,
            num_outputs=event.outputs,
        )
        if k < len(files):
            module = _module(files[k], event, load)
            if module is not None:
                modules[g.graph_hash] = module
                g.module_name, g.hlo_path, g.instructions = (
                    module.name,
                    files[k],
                    module.instruction_count,
                )
                g.parameter_shapes = [p.shape for p in module.entry.parameters]
        run.graphs.append(g)
    for i, events in enumerate(per_step):
        for e in events:
            g = run.graph(e.graph_hash)
            if e.kind == "execute" and g is not None and i not in g.steps_ran and i < len(per_step):
                g.steps_ran.append(i)
    return modules


def _module(
    path: str, event: DebugEvent, load: Optional[Callable[[str], Module]] = None
) -> Optional[Module]:
    """The dumped module if it is the one the debug block describes (same parameter count)."""
    if load is not None:
        module = load(path)
    else:
        try:
            module = read_modules(path)[0]
        except Exception:  # a dump we cannot parse is reported as missing HLO, not as a crash
            return None
    if event.inputs is not None and module.parameter_count != event.inputs:
        return None
    return module


def _steps(run: XlaRun, step_msgs: list[dict[str, Any]], per_step: list[list[DebugEvent]]) -> None:
    seen: set[str] = {g.graph_hash for g in run.graphs if g.step < 0}
    for m in step_msgs:
        i = m["step"]
        events = per_step[i] if i < len(per_step) else []
        executed = [e for e in events if e.kind == "execute"]
        new = [e.graph_hash for e in events if e.kind == "compile" and e.graph_hash not in seen]
        seen.update(e.graph_hash for e in events)
        last = executed[-1] if executed else None
        run.steps.append(
            Step(
                step=i,
                compiled=m.get("uncached", 0) > 0,
                graph_hash=last.graph_hash if last else None,
                compile_ms=m.get("compile_ms", 0.0),
                execute_ms=m.get("execute_ms", 0.0),
                wall_ms=m["wall_ms"],
                num_parameters=last.inputs if last else None,
                graph_hashes=[e.graph_hash for e in executed],
                new_graphs=new,
                uncached=m.get("uncached", 0),
                cached=m.get("cached", 0),
                live_report=m.get("live_report", ""),
                source_lines=m.get("source_lines"),
            )
        )


def _explain(run: XlaRun, modules: dict[str, Module], threshold: float) -> None:
    with_hlo = [g for g in run.graphs if g.graph_hash in modules]
    groups = (
        near_duplicate_groups([modules[g.graph_hash] for g in with_hlo], threshold)
        if with_hlo
        else []
    )
    for g, number in zip(with_hlo, groups):
        g.group = number
    profiles = {h: profile(m) for h, m in modules.items()}
    op_profiles = {h: profile(m, shapes=False) for h, m in modules.items()}
    sentences: dict[str, str] = {}
    for k, g in enumerate(run.graphs):
        earlier = [
            (e.graph_hash, profiles[e.graph_hash])
            for e in run.graphs[:k]
            if e.graph_hash in profiles
        ]
        diff, against, score = None, None, 0.0
        if g.graph_hash in profiles and earlier:
            against, score = closest(profiles[g.graph_hash], earlier)
            if score < threshold:  # the same program with other shapes is still a recompile of it
                by_ops = closest(
                    op_profiles[g.graph_hash], [(h, op_profiles[h]) for h, _ in earlier]
                )
                if by_ops[1] >= threshold:
                    against, score = by_ops
            diff = diff_modules(modules[against], modules[g.graph_hash])
            g.closest, g.diff_summary = against, diff.summary
            g.recompile = score >= threshold
        elif k > 0 and g.graph_hash not in profiles:
            against = run.graphs[k - 1].graph_hash
        prior = run.graph(against) if against else None
        sentences[g.graph_hash] = new_graph_sentence(
            g.graph_hash,
            against,
            prior.step if prior else None,
            score,
            diff,
            g.xla_cause,
            threshold,
        )
    for s in run.steps:
        if s.new_graphs:
            s.cause = sentences.get(s.new_graphs[-1], "")
            if s.source_lines is False and s.cause:
                s.cause += (
                    " (source lines were off for this step because the run had settled; they are on "
                    "again from the next step, so a repeat of this graph will name its lines)"
                )
            g = run.graph(s.new_graphs[-1])
            s.diff_summary = (g.diff_summary or None) if g is not None and g.recompile else None
        elif s.graph_hash is not None or not s.compiled:
            g = run.graph(s.graph_hash) if s.graph_hash else None
            s.cause = cached_sentence(s.graph_hash, g.step if g else None, evicted=s.compiled)


__all__ = ["dumped_modules", "assemble"]
