"""An index-based view of one computation, the form the matcher works on.

Integers and lists are several times faster than dicts of names for the passes the matcher
makes over 35,000 instructions, so each computation is flattened once into parallel lists:
instruction, operands, users, self and subgraph fingerprints.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.hlo.fingerprint import Interner, computation_hashes, computation_prints
from explorer.hlo.model import Computation, HloInstruction, Module


@dataclass
class Graph:
    """Parallel lists indexed by an instruction's position in topological order."""

    comp: Computation
    insts: list[HloInstruction]
    index: dict[str, int]
    operands: list[list[int]]
    users: list[list[int]]
    self_print: list[str]
    subgraph_print: list[str]
    file_pos: list[int]
    root: int

    def __len__(self) -> int:
        return len(self.insts)


def entry_graph(module: Module, interner: Interner) -> Graph:
    """The entry computation as a :class:`Graph`, parameters fingerprinted without numbers.

    Pass the same ``interner`` for both modules of a diff so equal structures get equal ids.
    """
    hashes = computation_hashes(module, include_entry=False)
    comp = module.entry
    prints = computation_prints(comp, hashes, with_numbers=False, hasher=interner)
    insts = list(comp.order)
    index = {inst.name: k for k, inst in enumerate(insts)}
    operands = [[index[o] for o in inst.operands] for inst in insts]
    users: list[list[int]] = [[] for _ in insts]
    for k, ops in enumerate(operands):
        for o in dict.fromkeys(ops):
            users[o].append(k)
    file_index = {inst.name: k for k, inst in enumerate(comp.instructions)}
    assert comp.root is not None
    return Graph(
        comp=comp,
        insts=insts,
        index=index,
        operands=operands,
        users=users,
        self_print=[prints.self_print[i.name] for i in insts],
        subgraph_print=[prints.subgraph_print[i.name] for i in insts],
        file_pos=[file_index[i.name] for i in insts],
        root=index[comp.root.name],
    )


__all__ = ["Graph", "entry_graph"]
