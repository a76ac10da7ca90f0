"""An index-based view of one computation, the form the matcher and the diff work on.

Integers and lists are several times faster than dicts of names for the passes the matcher
makes over 35,000 instructions, so each computation is flattened once into parallel lists:
operands, users, self and subgraph fingerprints, and the few fields of an instruction the diff
reads for every pair (opcode, shape, literal, parameter number, metadata, line). The full
:class:`HloInstruction` is asked for only where a record names one (``Graph.insts``), so a
graph built straight from text (:mod:`explorer.xla.hlo.flat_graph`) never makes the other
35,000.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Optional, Protocol, Sequence

from explorer.xla.hlo.fingerprint import Interner, attr_text, computation_hashes
from explorer.xla.hlo.model import Computation, HloInstruction, Metadata, Module
from explorer.xla.hlo.slot_record import SlotRecord


class Instructions(Protocol):
    """What a graph's ``insts`` is: a list, or instructions made when asked for."""

    def __getitem__(self, k: int, /) -> HloInstruction: ...

    def __len__(self) -> int: ...


class Graph(SlotRecord):
    """Parallel lists indexed by an instruction's position in topological order.

    A graph the compiled reader built holds its names, operands, users and fingerprints as
    sequences over C arrays (``_kernels.Column``: each item made when asked for), which the
    compiled matcher and diff read without making the items.
    """

    __slots__ = (
        "name",
        "parameter_count",
        "insts",
        "names",
        "opcodes",
        "shapes",
        "literals",
        "numbers",
        "metadata",
        "lines",
        "operands",
        "users",
        "self_print",
        "subgraph_print",
        "file_pos",
        "root",
    )

    def __init__(
        self,
        *,
        name: str,
        parameter_count: int,
        insts: Instructions,
        names: Sequence[str],
        opcodes: list[str],
        shapes: list[str],
        literals: list[str],
        numbers: list[Optional[int]],
        metadata: list[Metadata],
        lines: list[int],
        operands: Sequence[list[int]],
        users: Sequence[list[int]],
        self_print: Sequence[int],
        subgraph_print: Sequence[int],
        file_pos: list[int],
        root: int,
    ) -> None:
        self.name = name
        self.parameter_count = parameter_count
        self.insts = insts
        self.names = names
        self.opcodes = opcodes
        self.shapes = shapes
        self.literals = literals
        self.numbers = numbers
        self.metadata = metadata
        self.lines = lines
        self.operands = operands
        self.users = users
        self.self_print = self_print
        self.subgraph_print = subgraph_print
        self.file_pos = file_pos
        self.root = root

    def __len__(self) -> int:
        return len(self.names)


def entry_graph(module: Module, interner: Interner) -> Graph:
    """The entry computation as a :class:`Graph`, parameters fingerprinted without numbers.

    Pass the same ``interner`` for both modules of a diff so equal structures get equal ids.
    The fingerprints are those of :func:`computation_prints` (same self keys, so equal exactly
    when those are equal), computed in the same pass that numbers operands and users: a
    subgraph's key is the tuple of its own id and its operands' ids, which the interner
    tells apart from the self keys (strings) and from each other as exactly as the text did.
    """
    hashes = computation_hashes(module, include_entry=False, hasher=interner)
    comp = module.entry
    ids = interner.graph_ids
    ids_get = ids.get
    insts = list(comp.order)
    index: dict[str, int] = {}
    operands: list[list[int]] = []
    users: list[list[int]] = [[] for _ in insts]
    selfs: list[int] = []
    subs: list[int] = []
    for k, inst in enumerate(insts):
        opcode = inst.opcode
        if opcode == "parameter":
            key = opcode + "|" + inst.shape
        else:
            key = opcode + "|" + inst.shape + "|" + inst.literal
        if inst.attrs:
            key += attr_text(inst.attrs, hashes)
        own = ids_get(key)
        if own is None:
            own = ids[key] = len(ids)
        selfs.append(own)
        index[inst.name] = k
        names = inst.operands
        if not names:
            operands.append([])
            subs.append(own)
            continue
        if len(names) == 1:
            o = index[names[0]]
            ops = [o]
            users[o].append(k)
            sub_key: tuple = (own, subs[o])
        else:
            ops = [index[n] for n in names]
            for o in dict.fromkeys(ops):
                users[o].append(k)
            sub_key = (own, *[subs[o] for o in ops])
        operands.append(ops)
        sub = ids_get(sub_key)
        if sub is None:
            sub = ids[sub_key] = len(ids)
        subs.append(sub)
    assert comp.root is not None
    return Graph(
        name=module.name,
        parameter_count=module.parameter_count,
        insts=insts,
        names=list(index),
        opcodes=list(map(attrgetter("opcode"), insts)),
        shapes=list(map(attrgetter("shape"), insts)),
        literals=list(map(attrgetter("literal"), insts)),
        numbers=list(map(attrgetter("parameter_number"), insts)),
        metadata=list(map(attrgetter("metadata"), insts)),
        lines=list(map(attrgetter("line"), insts)),
        operands=operands,
        users=users,
        self_print=selfs,
        subgraph_print=subs,
        file_pos=_file_positions(comp, insts),
        root=index[comp.root.name],
    )


def _file_positions(comp: Computation, insts: list[HloInstruction]) -> list[int]:
    """Where each instruction of the topological order sits in the file's order."""
    if comp.order == comp.instructions:  # the usual case: file order is topological
        return list(range(len(insts)))
    file_index = {inst.name: k for k, inst in enumerate(comp.instructions)}
    return [file_index[inst.name] for inst in insts]


__all__ = ["Graph", "Instructions", "entry_graph"]
