"""Diff two modules: match them structurally, then turn the matching into typed records.

What a torch_xla user needs to know, in the order the summary tells it: did the parameter
order change (a recompile by itself), what computation was added or removed and which aten op
and Python line it came from, which matched instructions changed, which constants only moved.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from typing import NamedTuple

from explorer.gcpause import paused_gc
from explorer.xla.hlo import kernels
from explorer.xla.hlo.fingerprint import Interner
from explorer.xla.hlo.graph import Graph, entry_graph
from explorer.xla.hlo.matcher import UNMATCHED, Matching, match
from explorer.xla.hlo.model import HloInstruction, Metadata, Module, tuple_arity
from explorer.xla.hlo.records import (
    ChangedInstruction,
    HloDiff,
    InstructionGroup,
    MovedConstant,
    ParameterMove,
    TupleArityChange,
)
from explorer.xla.hlo.summary import summarize


def diff_modules(a: Module, b: Module, pairs: bool = True) -> HloDiff:
    """The structural difference from module ``a`` to module ``b``.

    ``pairs=False`` leaves :attr:`HloDiff.pairs` empty: the CLI's answer does not show the
    35,000 matched names, so it does not build them.
    """
    with paused_gc():
        interner = Interner()
        return diff_graphs(entry_graph(a, interner), entry_graph(b, interner), pairs)


def diff_graphs(ga: Graph, gb: Graph, pairs: bool = True) -> HloDiff:
    """The diff of two entry graphs built with one :class:`Interner`."""
    m = match(ga, gb)
    facts = pair_facts(ga, gb, m)
    params = _matched_parameters(ga, gb, m.a_to_b)
    out = HloDiff(
        module_a=ga.name,
        module_b=gb.name,
        instructions_a=len(ga),
        instructions_b=len(gb),
        matched_count=facts.matched_count,
        parameter_permutation=_permutation(ga, gb, params),
        parameters_a=ga.parameter_count,
        parameters_b=gb.parameter_count,
        added=_groups("added", gb, facts.free_b),
        removed=_groups("removed", ga, facts.free_a),
        changed=_changed(ga, gb, facts.changed),
        moved_constants=_moved_constants(ga, gb, facts.moved),
        tuple_arity=_arity(ga, gb, facts.changed),
        pairs=_pairs(ga, gb, m.a_to_b) if pairs else [],
        parameter_order_kept=_order_kept(params),
    )
    out.summary = summarize(out)
    return out


class PairFacts(NamedTuple):
    """What the diff reads off every pair of a matching, in A's order."""

    matched_count: int
    free_a: list[int]  # A's instructions without a partner (removed)
    free_b: list[int]  # B's (added)
    changed: list[tuple[int, int, tuple[str, ...]]]  # matched pairs that differ, and how
    moved: list[tuple[int, int, bool]]  # matched constants that moved (users changed?)


#: The kinds of a change, by bit, in the order a record names them.
_KINDS = ("opcode", "shape", "literal", "attributes", "operands")
_KIND_SETS = [tuple(k for bit, k in enumerate(_KINDS) if mask >> bit & 1) for mask in range(32)]


def pair_facts(ga: Graph, gb: Graph, m: Matching) -> PairFacts:
    """:func:`pair_facts_python`, by the compiled ``diff_pairs`` where it is built."""
    compiled = kernels.compiled()
    if compiled is None:
        return pair_facts_python(ga, gb, m)
    count, free_a, free_b, changed, moved = compiled.diff_pairs(
        m.a_to_b,
        m.b_to_a,
        ga.subgraph_print,
        gb.subgraph_print,
        ga.self_print,
        gb.self_print,
        ga.opcodes,
        gb.opcodes,
        ga.shapes,
        gb.shapes,
        ga.literals,
        gb.literals,
        ga.numbers,
        ga.operands,
        gb.operands,
        ga.users,
        gb.users,
        ga.file_pos,
        gb.file_pos,
    )
    kinds = _KIND_SETS
    return PairFacts(count, free_a, free_b, [(x, y, kinds[k]) for x, y, k in changed], moved)


def pair_facts_python(ga: Graph, gb: Graph, m: Matching) -> PairFacts:
    """The pairs' facts in Python: the oracle of the compiled ``diff_pairs``, and its fallback."""
    a_to_b = m.a_to_b
    xs = [x for x, y in enumerate(a_to_b) if y != UNMATCHED]
    matched = [(x, a_to_b[x]) for x in xs]
    # A pair with equal subgraph fingerprints has equal shapes too, so only these can differ.
    sub_a, sub_b = ga.subgraph_print, gb.subgraph_print
    unequal = [(x, y) for x, y in matched if sub_a[x] != sub_b[y]]
    return PairFacts(
        len(matched),
        [k for k, x in enumerate(a_to_b) if x == UNMATCHED],
        [k for k, x in enumerate(m.b_to_a) if x == UNMATCHED],
        _changed_pairs(ga, gb, unequal, m.b_to_a),
        _moved_pairs(ga, gb, matched, a_to_b),
    )


def _pairs(ga: Graph, gb: Graph, a_to_b: list[int]) -> list[tuple[str, str]]:
    xs = [x for x, y in enumerate(a_to_b) if y != UNMATCHED]
    ys = [a_to_b[x] for x in xs]
    return list(zip(map(ga.names.__getitem__, xs), map(gb.names.__getitem__, ys)))


def _matched_parameters(ga: Graph, gb: Graph, a_to_b: list[int]) -> list[tuple[int, int, int, int]]:
    """``(A's number, B's number, A's index, B's index)`` of each matched parameter pair, in A's
    order of numbers (one pass over A's instructions: the numbers of a large graph are a C
    column, each item made when read)."""
    num_a, num_b = ga.numbers, gb.numbers
    out = []
    for x in [x for x, n in enumerate(num_a) if n is not None]:
        y = a_to_b[x]
        if y == -1:
            continue
        na, nb = num_a[x], num_b[y]
        if na is not None and nb is not None:
            out.append((na, nb, x, y))
    out.sort()
    return out


def _permutation(
    ga: Graph, gb: Graph, matched: list[tuple[int, int, int, int]]
) -> list[ParameterMove]:
    moves = [
        ParameterMove(na, nb, ga.shapes[x], ga.metadata[x].op_name, ga.names[x], gb.names[y])
        for na, nb, x, y in matched
        if na != nb
    ]
    return sorted(moves, key=lambda p: p.index_a)


def _order_kept(matched: list[tuple[int, int, int, int]]) -> bool:
    """Whether the matched parameters keep their order (B's numbers rise with A's): then every
    move is a shift around parameters added or removed, not a reordering."""
    return all(p[1] < q[1] for p, q in zip(matched, matched[1:]))


_NODE_ID = re.compile(r"\.\d+(?=/|$)")


def _groups(side: str, g: Graph, idx: list[int]) -> list[InstructionGroup]:
    buckets: dict[tuple[str, str, str], list[int]] = {}
    keys: dict[Metadata, tuple[str, str, str]] = {}
    metadata = g.metadata
    for k in sorted(idx, key=g.file_pos.__getitem__):
        md = metadata[k]
        key = keys.get(md)
        if key is None:
            # torch_xla puts renumbered IR ids in op_name ("aten__add.1666/aten__add"): drop them.
            key = keys[md] = (md.op_type, _NODE_ID.sub("", md.op_name), md.source)
        buckets.setdefault(key, []).append(k)
    groups = []
    for (op_type, op_name, source), members in buckets.items():
        ops = Counter(map(g.opcodes.__getitem__, members))
        groups.append(
            InstructionGroup(
                side=side,
                op_type=op_type,
                op_name=op_name,
                source=source,
                count=len(members),
                opcodes=tuple(ops.most_common()),
                names=tuple(map(g.names.__getitem__, members)),
                lines=tuple(map(g.lines.__getitem__, members)),
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


def _changed_pairs(
    ga: Graph, gb: Graph, pairs: list[tuple[int, int]], b_to_a: list[int]
) -> list[tuple[int, int, tuple[str, ...]]]:
    """Matched pairs that differ, and how, from ``pairs`` (those with unequal subgraph
    fingerprints)."""
    out = []
    sub_a, sub_b = ga.subgraph_print, gb.subgraph_print
    op_a, op_b = ga.opcodes, gb.opcodes
    shape_a, shape_b = ga.shapes, gb.shapes
    lit_a, lit_b = ga.literals, gb.literals
    for x, y in pairs:
        if sub_a[x] == sub_b[y]:
            continue
        kinds = []
        if op_a[x] != op_b[y]:
            kinds.append("opcode")
        if shape_a[x] != shape_b[y]:
            kinds.append("shape")
        if lit_a[x] != lit_b[y] and ga.numbers[x] is None:
            kinds.append("literal")
        if ga.self_print[x] != gb.self_print[y] and not kinds:
            kinds.append("attributes")
        if [b_to_a[o] for o in gb.operands[y]] != ga.operands[x]:
            kinds.append("operands")
        if kinds:
            out.append((x, y, tuple(kinds)))
    return out


def _changed(
    ga: Graph, gb: Graph, changed: list[tuple[int, int, tuple[str, ...]]]
) -> list[ChangedInstruction]:
    out = []
    for x, y, kinds in changed:
        ia, ib = ga.insts[x], gb.insts[y]
        out.append(
            ChangedInstruction(
                ia.name,
                ib.name,
                kinds,
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


def _moved_pairs(
    ga: Graph, gb: Graph, pairs: list[tuple[int, int]], a_to_b: list[int]
) -> list[tuple[int, int, bool]]:
    """Matched constants off B's longest in-order run, or whose users changed, in A's file order."""
    if ga.file_pos == list(range(len(ga))):
        by_file = pairs  # already in A's file order (pairs come in A's order)
    else:
        by_file = sorted(pairs, key=lambda p: ga.file_pos[p[0]])
    pos_b = gb.file_pos
    keep = _in_order([pos_b[y] for _, y in by_file])
    op_a, op_b = ga.opcodes, gb.opcodes
    out = []
    for (x, y), stays in zip(by_file, keep):
        if op_a[x] != "constant" or op_b[y] != "constant":
            continue
        users_changed = sorted(a_to_b[u] for u in ga.users[x]) != sorted(gb.users[y])
        if stays and not users_changed:
            continue
        out.append((x, y, users_changed))
    return out


def _moved_constants(
    ga: Graph, gb: Graph, moved: list[tuple[int, int, bool]]
) -> list[MovedConstant]:
    out = []
    for x, y, users_changed in moved:
        md = ga.metadata[x]
        out.append(
            MovedConstant(
                ga.literals[x],
                ga.shapes[x],
                md.op_type,
                md.op_name,
                ga.names[x],
                gb.names[y],
                ga.lines[x],
                gb.lines[y],
                users_changed,
            )
        )
    return out


def _arity(
    ga: Graph, gb: Graph, changed: list[tuple[int, int, tuple[str, ...]]]
) -> list[TupleArityChange]:
    out = []
    shape_a, shape_b = ga.shapes, gb.shapes
    for x, y, kinds in changed:
        if "shape" not in kinds:  # equal shapes
            continue
        na, nb = tuple_arity(shape_a[x]), tuple_arity(shape_b[y])
        if na is not None and nb is not None and na != nb:
            out.append(TupleArityChange(ga.names[x], gb.names[y], gb.opcodes[y], na, nb))
    return out


__all__ = ["PairFacts", "diff_graphs", "diff_modules", "pair_facts", "pair_facts_python", "short"]
