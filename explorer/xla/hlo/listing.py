"""Listing the modules of a file and grouping near-duplicates.

A save file from a training run holds dozens of graphs; the seed issue's question is "these 4
graphs, are they the same program with small changes?". Each module gets its size, parameter
count and structural fingerprint; modules whose multisets of (opcode, shape) overlap by at
least ``threshold`` (weighted Jaccard) fall into one group.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

from explorer.errors import InputError, excerpt
from explorer.xla.hlo.fingerprint import module_fingerprint
from explorer.xla.hlo.model import Module


@dataclass(frozen=True)
class ModuleInfo:
    """One line of ``hlo-list``.

    ``instructions`` counts the entry computation's instructions (parameters and constants
    included), as ``hlo-diff`` does for the same module; ``all_instructions`` adds those of the
    module's other computations, called or not (a dump may hold one the entry never calls).
    """

    index: int
    name: str
    instructions: int
    parameters: int
    fingerprint: str
    first_line: int
    graph_hash: str
    group: int
    all_instructions: int


def _profile(module: Module) -> Counter:
    return Counter(
        (i.opcode, i.shape) for c in module.computations.values() for i in c.instructions
    )


def similarity(a: Counter, b: Counter) -> float:
    """Weighted Jaccard of two (opcode, shape) multisets: 1.0 for the same multiset."""
    inter = sum((a & b).values())
    union = sum((a | b).values())
    return inter / union if union else 1.0


def near_duplicate_groups(modules: list[Module], threshold: float = 0.8) -> list[int]:
    """A group number per module; equal numbers mean "same program with small changes".

    Groups are the connected components of "similarity >= threshold", numbered in order of
    first appearance. Comparing every pair is quadratic (20,000 tiny modules took 38 s), so:
    modules with equal profiles are compared once; each multiset is read as the set of
    ``(item, k)`` for its k-th copy of an item, whose Jaccard equals the weighted one; and only
    pairs whose *prefixes* share an item are compared (prefix filtering: with items ordered
    rarest first, two sets with Jaccard >= t share an item among their first
    ``|x| - ceil(t |x|) + 1``). The result is exactly the all-pairs one.
    """
    profiles = [_profile(m) for m in modules]
    parent = list(range(len(modules)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = find(i), find(j)
        if a != b:
            parent[max(a, b)] = min(a, b)

    if threshold > 1:  # nothing reaches it, not even an identical module
        return list(range(len(modules)))
    first_of: dict[frozenset, int] = {}
    distinct: list[int] = []
    for i, prof in enumerate(profiles):
        key = frozenset(prof.items())
        if key in first_of:
            union(first_of[key], i)
        else:
            first_of[key] = i
            distinct.append(i)
    _link_similar(distinct, profiles, threshold, find, union)
    numbers: dict[int, int] = {}
    return [numbers.setdefault(find(i), len(numbers)) for i in range(len(modules))]


def _link_similar(
    candidates: list[int], profiles: list[Counter], threshold: float, find, union
) -> None:
    """Union every pair of ``candidates`` whose similarity reaches ``threshold`` (prefix filtering).

    Sets are taken by ascending size, so an indexed ``y`` meets only ``x`` with ``|x| >= |y|``,
    which need an overlap of at least ``t/(1+t) (|x|+|y|)``: ``x`` probes with its first
    ``|x| - ceil(t |x|) + 1`` items and ``y`` is indexed under its first
    ``|y| - ceil(2t/(1+t) |y|) + 1`` (PPJoin's bounds; both prefixes must then share an item).
    """
    if threshold <= 0:
        for i in candidates[1:]:
            union(candidates[0], i)
        return
    items = {i: [(key, k) for key, n in profiles[i].items() for k in range(n)] for i in candidates}
    frequency: Counter = Counter(item for i in candidates for item in items[i])
    rank = {item: r for r, item in enumerate(sorted(frequency, key=lambda it: (frequency[it], it)))}
    # token -> {component root when filed: members}; a component is skipped as a whole once
    # the probing set belongs to it, so 20,000 similar modules do not rescan each other.
    index: dict[int, dict[int, list[int]]] = {}
    indexed_share = 2 * threshold / (1 + threshold)
    for i in sorted(candidates, key=lambda c: len(items[c])):
        size = len(items[i])
        if size == 0:  # an empty profile equals only another empty one, already joined as equal
            continue
        ordered = sorted(rank[it] for it in items[i])
        seen: set[int] = set()
        for token in ordered[: size - math.ceil(threshold * size - 1e-9) + 1]:
            buckets = index.get(token)
            if buckets:
                _relabel(buckets, find)
                for root, members in buckets.items():
                    if find(root) == find(i):
                        continue
                    for j in members:
                        if j in seen:
                            continue
                        seen.add(j)
                        # sizes ascend, so |j| <= |i|; Jaccard >= t needs |j| >= t |i|
                        if (
                            len(items[j]) >= threshold * size - 1e-9
                            and similarity(profiles[i], profiles[j]) >= threshold
                        ):
                            union(i, j)
                            break  # i is in this component now: its other members add nothing
        for token in ordered[: size - math.ceil(indexed_share * size - 1e-9) + 1]:
            index.setdefault(token, {}).setdefault(find(i), []).append(i)


def _relabel(buckets: dict[int, list[int]], find) -> None:
    """File buckets under their components' current roots, merging those of one component."""
    for root in [r for r in buckets if find(r) != r]:
        members = buckets.pop(root)
        target = buckets.setdefault(find(root), [])
        if len(target) < len(members):
            target, members = members, target
            buckets[find(root)] = target
        target.extend(members)


def list_modules(modules: list[Module], threshold: float = 0.8) -> list[ModuleInfo]:
    """Size, parameter count, fingerprint and near-duplicate group of every module."""
    groups = near_duplicate_groups(modules, threshold)
    return [
        ModuleInfo(
            k,
            m.name,
            m.instruction_count,
            m.parameter_count,
            module_fingerprint(m),
            m.first_line,
            m.graph_hash,
            groups[k],
            m.all_instruction_count,
        )
        for k, m in enumerate(modules)
    ]


def select_module(modules: list[Module], key: str, source: str) -> Module:
    """A module by index (``0``, ``-1``) or by name; an InputError lists the choices."""
    text = key.strip()
    if not re.fullmatch(r"[+-]?\d+", text):
        hits = [m for m in modules if m.name == key]
        if len(hits) == 1:
            return hits[0]
        names = ", ".join(f"{i}:{excerpt(m.name, 40)[1:-1]}" for i, m in enumerate(modules[:20]))
        if hits:
            raise InputError(
                f"{source}: {len(hits)} modules are named {excerpt(key)}; pick one by index ({names})"
            )
        raise InputError(f"{source}: no module named {excerpt(key)}; the modules are {names}")
    if len(text.lstrip("+-").lstrip("0")) <= 18 and -len(modules) <= int(text) < len(modules):
        return modules[int(text)]
    raise InputError(
        f"{source}: module index {excerpt(text, 24)} is out of range: the file holds {len(modules)} "
        f"modules (0..{len(modules) - 1}, or -{len(modules)}..-1 counting from the last)"
    )


__all__ = ["ModuleInfo", "similarity", "near_duplicate_groups", "list_modules", "select_module"]
