"""One ``Graph Hash:`` under which the save file holds structurally different programs.

torch_xla's graph hash names the pending IR; the save file prints the HLO of every execution.
Two prints under one hash normally differ only in renumbering (``.N`` suffixes, module names),
which the structural fingerprint ignores; when the fingerprints differ (seen in a user's save
file: one transpose apart), the programs differ and are reported side by side with their diff,
never merged into one graph, and the step where the second program ran says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from explorer.xla.hlo import Module, diff_modules, module_fingerprint
from explorer.xla.traces.records import XlaRun
from explorer.xla.traces.savefile import SaveBlock

__all__ = ["SameHash", "find_same_hash"]


@dataclass
class SameHash:
    """One ``Graph Hash:`` under which the save file holds structurally different programs."""

    graph_hash: str
    lines: list[int]
    steps: list[Optional[int]]
    instructions: list[int]
    diff_summary: str

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


def find_same_hash(
    run: XlaRun, blocks: list[SaveBlock], executions: list[tuple[int, str]]
) -> list[SameHash]:
    """Hashes whose saved programs differ in structure, not only in renumbering: kept apart."""
    step_of = _block_steps(blocks, executions)
    by_hash: dict[str, list[tuple[str, SaveBlock, Module]]] = {}
    for b in blocks:
        if b.module is None or not b.graph_hash:
            continue
        variants = by_hash.setdefault(b.graph_hash, [])
        fp = module_fingerprint(b.module)
        if all(fp != v for v, _, _ in variants):
            variants.append((fp, b, b.module))
    out = []
    for h, variants in by_hash.items():
        if len(variants) < 2:
            continue
        _, base, base_module = variants[0]
        diffs = [diff_modules(base_module, m).summary for _, _, m in variants[1:]]
        same = SameHash(
            h,
            [b.line for _, b, _ in variants],
            [step_of.get(b.line) for _, b, _ in variants],
            [m.instruction_count for _, _, m in variants],
            " | ".join(diffs),
        )
        out.append(same)
        for (_, b, _), summary in zip(variants[1:], diffs):
            step = step_of.get(b.line)
            for s in run.steps:
                if s.step == step:
                    s.cause += (
                        f"; but its HLO differs from the text first saved under the same Graph Hash "
                        f"{h[:8]} (save file line {base.line}): {summary}"
                    )
    return out


def _block_steps(
    blocks: list[SaveBlock], executions: list[tuple[int, str]]
) -> dict[int, Optional[int]]:
    """Save-file line of each block -> its step (-1: setup): the k-th block is the k-th execution."""
    out: dict[int, Optional[int]] = {}
    k = 0
    for b in blocks:
        while k < len(executions) and executions[k][1] != b.graph_hash:
            k += 1
        out[b.line] = executions[k][0] if k < len(executions) else None
        k += 1
    return out
