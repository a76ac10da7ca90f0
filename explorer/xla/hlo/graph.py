"""An index-based view of one computation, the form the matcher works on.

Integers and lists are several times faster than dicts of names for the passes the matcher
makes over 35,000 instructions, so each computation is flattened once into parallel lists:
instruction, operands, users, self and subgraph fingerprints.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.xla.hlo.fingerprint import Interner, computation_hashes, computation_prints
from explorer.xla.hlo.model import Computation, HloInstruction, Module


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
    names = [inst.name for inst in insts]
    index = {name: k for k, name in enumerate(names)}
    lookup = index.__getitem__
    operands = [list(map(lookup, inst.operands)) for inst in insts]
    users: list[list[int]] = [[] for _ in insts]
    for k, ops in enumerate(operands):
        if len(ops) == 1:
            users[ops[0]].append(k)
        else:
            for o in dict.fromkeys(ops):
                users[o].append(k)
    if [i.name for i in comp.instructions] == names:  # the usual case: file order is topological
        file_pos = list(range(len(insts)))
    else:
        file_index = {inst.name: k for k, inst in enumerate(comp.instructions)}
        file_pos = [file_index[name] for name in names]
    assert comp.root is not None
    return Graph(
        comp=comp,
        insts=insts,
        index=index,
        operands=operands,
        users=users,
        self_print=list(map(prints.self_print.__getitem__, names)),
        subgraph_print=list(map(prints.subgraph_print.__getitem__, names)),
        file_pos=file_pos,
        root=index[comp.root.name],
    )


__all__ = ["Graph", "entry_graph"]
