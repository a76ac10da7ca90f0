"""Diff two modules: match them structurally, then turn the matching into typed records.

What a torch_xla user needs to know, in the order the summary tells it: did the parameter
order change (a recompile by itself), what computation was added or removed and which aten op
and Python line it came from, which matched instructions changed, which constants only moved.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from operator import attrgetter

from explorer.xla.hlo.fingerprint import Interner
from explorer.xla.hlo.gcpause import paused_gc
from explorer.xla.hlo.graph import Graph, entry_graph
from explorer.xla.hlo.matcher import UNMATCHED, match
from explorer.xla.hlo.model import HloInstruction, Module, tuple_arity
from explorer.xla.hlo.records import (
    ChangedInstruction,
    HloDiff,
    InstructionGroup,
    MovedConstant,
    ParameterMove,
    TupleArityChange,
)
from explorer.xla.hlo.summary import summarize


def diff_modules(a: Module, b: Module) -> HloDiff:
    """The structural difference from module ``a`` to module ``b``."""
    with paused_gc():
        return _diff(a, b)


def _diff(a: Module, b: Module) -> HloDiff:
    interner = Interner()
    ga, gb = entry_graph(a, interner), entry_graph(b, interner)
    m = match(ga, gb)
    # The pairs in A's order, and those whose subgraphs differ: a pair with equal subgraph
    # fingerprints has equal shapes too, so only those can have changed.
    a_to_b = m.a_to_b
    xs = [x for x, y in enumerate(a_to_b) if y != UNMATCHED]
    ys = [a_to_b[x] for x in xs]
    pairs = list(zip(xs, ys))
    sub_a, sub_b = ga.subgraph_print, gb.subgraph_print
    unequal = [(x, y) for x, y in pairs if sub_a[x] != sub_b[y]]
    name = attrgetter("name")
    out = HloDiff(
        module_a=a.name,
        module_b=b.name,
        instructions_a=len(ga),
        instructions_b=len(gb),
        matched_count=len(pairs),
        parameter_permutation=_permutation(ga, gb, m.a_to_b),
        parameters_a=a.parameter_count,
        parameters_b=b.parameter_count,
        added=_groups("added", gb, [k for k, x in enumerate(m.b_to_a) if x == -1]),
        removed=_groups("removed", ga, [k for k, x in enumerate(m.a_to_b) if x == -1]),
        changed=_changed(ga, gb, unequal, m.b_to_a),
        moved_constants=_moved_constants(ga, gb, pairs, m.a_to_b),
        tuple_arity=_arity(ga, gb, unequal),
        pairs=list(
            zip(map(name, map(ga.insts.__getitem__, xs)), map(name, map(gb.insts.__getitem__, ys)))
        ),
    )
    out.summary = summarize(out)
    return out


def _permutation(ga: Graph, gb: Graph, a_to_b: list[int]) -> list[ParameterMove]:
    moves = []
    for x, ia in enumerate(ga.insts):
        if ia.parameter_number is None or a_to_b[x] == -1:
            continue
        ib = gb.insts[a_to_b[x]]
        if (
            ia.parameter_number is not None
            and ib.parameter_number is not None
            and ia.parameter_number != ib.parameter_number
        ):
            moves.append(
                ParameterMove(
                    ia.parameter_number,
                    ib.parameter_number,
                    ia.shape,
                    ia.metadata.op_name,
                    ia.name,
                    ib.name,
                )
            )
    return sorted(moves, key=lambda p: p.index_a)


_NODE_ID = re.compile(r"\.\d+(?=/|$)")


def _groups(side: str, g: Graph, idx: list[int]) -> list[InstructionGroup]:
    buckets: dict[tuple[str, str, str], list[HloInstruction]] = {}
    for k in sorted(idx, key=lambda k: g.file_pos[k]):
        inst = g.insts[k]
        md = inst.metadata
        # torch_xla puts renumbered IR ids in op_name ("aten__add.1666/aten__add"): drop them.
        buckets.setdefault((md.op_type, _NODE_ID.sub("", md.op_name), md.source), []).append(inst)
    groups = []
    for (op_type, op_name, source), insts in buckets.items():
        ops = Counter(i.opcode for i in insts)
        groups.append(
            InstructionGroup(
                side=side,
                op_type=op_type,
                op_name=op_name,
                source=source,
                count=len(insts),
                opcodes=tuple(ops.most_common()),
                names=tuple(i.name for i in insts),
                lines=tuple(i.line for i in insts),
            )
        )
    return sorted(groups, key=lambda gr: (-gr.count, gr.op_type, gr.source))


def short(inst: HloInstruction) -> str:
    """A one-line description without names: ``f32[4]{0} multiply(2 operands), dims...``."""
    inner = (
        inst.literal
        if inst.opcode in ("constant", "parameter")
        else f"{len(inst.operands)} operands"
    )
    attrs = ", ".join(f"{k}={v}" for k, v in inst.attrs if k not in ("backend_config",))
    text = f"{inst.shape} {inst.opcode}({inner})" + (f", {attrs}" if attrs else "")
    return text if len(text) <= 200 else text[:197] + "..."


def _changed(
    ga: Graph, gb: Graph, pairs: list[tuple[int, int]], b_to_a: list[int]
) -> list[ChangedInstruction]:
    """Matched pairs that differ, from ``pairs`` (those with unequal subgraph fingerprints)."""
    out = []
    sub_a, sub_b = ga.subgraph_print, gb.subgraph_print
    for x, y in pairs:
        if sub_a[x] == sub_b[y]:
            continue
        ia, ib = ga.insts[x], gb.insts[y]
        kinds = []
        if ia.opcode != ib.opcode:
            kinds.append("opcode")
        if ia.shape != ib.shape:
            kinds.append("shape")
        if ia.literal != ib.literal and ia.parameter_number is None:
            kinds.append("literal")
        if ga.self_print[x] != gb.self_print[y] and not kinds:
            kinds.append("attributes")
        if [b_to_a[o] for o in gb.operands[y]] != ga.operands[x]:
            kinds.append("operands")
        if kinds:
            out.append(
                ChangedInstruction(
                    ia.name,
                    ib.name,
                    tuple(kinds),
                    short(ia),
                    short(ib),
                    ia.metadata.op_type or ib.metadata.op_type,
                    ia.metadata.op_name or ib.metadata.op_name,
                    ia.line,
                    ib.line,
                )
            )
    return sorted(out, key=lambda c: c.line_a)


def _in_order(seq: list[int]) -> list[bool]:
    """Which items of ``seq`` lie on one longest increasing subsequence (kept in place)."""
    tails: list[int] = []
    tail_idx: list[int] = []
    prev = [-1] * len(seq)
    for i, v in enumerate(seq):
        if not tails or v > tails[-1]:  # what bisect_left would say: the common, in-order case
            prev[i] = tail_idx[-1] if tails else -1
            tails.append(v)
            tail_idx.append(i)
            continue
        k = bisect_left(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_idx.append(i)
        else:
            tails[k] = v
            tail_idx[k] = i
        prev[i] = tail_idx[k - 1] if k else -1
    keep = [False] * len(seq)
    i = tail_idx[-1] if tail_idx else -1
    while i != -1:
        keep[i] = True
        i = prev[i]
    return keep


def _moved_constants(
    ga: Graph, gb: Graph, pairs: list[tuple[int, int]], a_to_b: list[int]
) -> list[MovedConstant]:
    if ga.file_pos == list(range(len(ga))):
        by_file = pairs  # already in A's file order (pairs come in A's order)
    else:
        by_file = sorted(pairs, key=lambda p: ga.file_pos[p[0]])
    pos_b = gb.file_pos
    keep = _in_order([pos_b[y] for _, y in by_file])
    insts_a, insts_b = ga.insts, gb.insts
    out = []
    for (x, y), stays in zip(by_file, keep):
        ia = insts_a[x]
        if ia.opcode != "constant":
            continue
        ib = insts_b[y]
        if ib.opcode != "constant":
            continue
        users_changed = sorted(a_to_b[u] for u in ga.users[x]) != sorted(gb.users[y])
        if stays and not users_changed:
            continue
        md = ia.metadata
        out.append(
            MovedConstant(
                ia.literal,
                ia.shape,
                md.op_type,
                md.op_name,
                ia.name,
                ib.name,
                ia.line,
                ib.line,
                users_changed,
            )
        )
    return out


def _arity(ga: Graph, gb: Graph, pairs: list[tuple[int, int]]) -> list[TupleArityChange]:
    out = []
    for x, y in pairs:
        ia, ib = ga.insts[x], gb.insts[y]
        if ia.shape == ib.shape:
            continue
        na, nb = tuple_arity(ia.shape), tuple_arity(ib.shape)
        if na is not None and nb is not None and na != nb:
            out.append(TupleArityChange(ia.name, ib.name, ib.opcode, na, nb))
    return out


__all__ = ["diff_modules", "short"]
