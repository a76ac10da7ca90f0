"""Listing the modules of a file and grouping near-duplicates.

A save file from a training run holds dozens of graphs; the seed issue's question is "these 4
graphs, are they the same program with small changes?". Each module gets its size, parameter
count and structural fingerprint; modules whose multisets of (opcode, shape) overlap by at
least ``threshold`` (weighted Jaccard) fall into one group.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from explorer.errors import InputError
from explorer.hlo.fingerprint import module_fingerprint
from explorer.hlo.model import Module


@dataclass(frozen=True)
class ModuleInfo:
    """One line of ``hlo-list``."""

    index: int
    name: str
    instructions: int
    parameters: int
    fingerprint: str
    first_line: int
    graph_hash: str
    group: int


def _profile(module: Module) -> Counter:
    return Counter((i.opcode, i.shape) for c in module.computations.values() for i in c.instructions)


def similarity(a: Counter, b: Counter) -> float:
    """Weighted Jaccard of two (opcode, shape) multisets: 1.0 for the same multiset."""
    inter = sum((a & b).values())
    union = sum((a | b).values())
    return inter / union if union else 1.0


def near_duplicate_groups(modules: list[Module], threshold: float = 0.8) -> list[int]:
    """A group number per module; equal numbers mean "same program with small changes"."""
    profiles = [_profile(m) for m in modules]
    parent = list(range(len(modules)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(modules)):
        for j in range(i + 1, len(modules)):
            if find(i) != find(j) and similarity(profiles[i], profiles[j]) >= threshold:
                parent[find(j)] = find(i)
    numbers: dict[int, int] = {}
    return [numbers.setdefault(find(i), len(numbers)) for i in range(len(modules))]


def list_modules(modules: list[Module], threshold: float = 0.8) -> list[ModuleInfo]:
    """Size, parameter count, fingerprint and near-duplicate group of every module."""
    groups = near_duplicate_groups(modules, threshold)
    return [ModuleInfo(k, m.name, m.instruction_count, m.parameter_count, module_fingerprint(m),
                       m.first_line, m.graph_hash, groups[k]) for k, m in enumerate(modules)]


def select_module(modules: list[Module], key: str, source: str) -> Module:
    """A module by index (``0``, ``-1``) or by name; an InputError lists the choices."""
    try:
        k = int(key)
    except ValueError:
        hits = [m for m in modules if m.name == key]
        if len(hits) == 1:
            return hits[0]
        names = ", ".join(f"{i}:{m.name}" for i, m in enumerate(modules[:20]))
        if hits:
            raise InputError(f"{source}: {len(hits)} modules are named {key!r}; pick one by index ({names})") from None
        raise InputError(f"{source}: no module named {key!r}; the modules are {names}") from None
    if -len(modules) <= k < len(modules):
        return modules[k]
    raise InputError(f"{source}: module index {k} is out of range: the file holds {len(modules)} modules "
                     f"(0..{len(modules) - 1})")
