"""Structural matching of two computations, in the spirit of OpenXLA's ``hlo_diff``.

Names carry no meaning across graphs (torch_xla renumbers them), so instructions are paired by
structure, strongest evidence first:

1. the two roots, and every subgraph fingerprint that occurs exactly once on each side;
2. top-down from matched pairs to their operands, position by position: first operands with
   equal subgraph fingerprints, then equal self fingerprints, then merely equal opcodes
   (a changed instruction under a matched user);
3. bottom-up: an unmatched instruction whose operands are all matched pairs with an unmatched
   user of the same kind on the other side;
4. what is left with equal subgraph fingerprints (identical dead constants, say) in file order.

Parameters with equal shapes are ambiguous by fingerprint and get resolved by step 2, by the
users that read them: exactly what a permutation needs.
"""

from __future__ import annotations

from collections import Counter

from explorer.xla.hlo import kernels
from explorer.xla.hlo.graph import Graph

_EXACT, _SELF, _OPCODE = 0, 1, 2
#: What ``a_to_b``/``b_to_a`` hold for an instruction without a partner.
UNMATCHED = -1


class Matching:
    """Pairs of indices into two :class:`Graph` objects; ``a_to_b[i] == -1`` when unmatched."""

    def __init__(self, ga: Graph, gb: Graph) -> None:
        self.ga, self.gb = ga, gb
        self.a_to_b = [-1] * len(ga)
        self.b_to_a = [-1] * len(gb)

    def pair(self, a: int, b: int) -> bool:
        """Record a pair if both are free; return whether it was recorded."""
        if self.a_to_b[a] != -1 or self.b_to_a[b] != -1:
            return False
        self.a_to_b[a] = b
        self.b_to_a[b] = a
        return True

    def pairs(self) -> list[tuple[int, int]]:
        """Matched pairs in A's topological order."""
        return [(a, b) for a, b in enumerate(self.a_to_b) if b != -1]

    @property
    def matched_count(self) -> int:
        return sum(1 for b in self.a_to_b if b != -1)


def _operand_pairs(ga: Graph, gb: Graph, a: int, b: int) -> list[tuple[int, int]]:
    oa, ob = ga.operands[a], gb.operands[b]
    if len(oa) == len(ob) or min(len(oa), len(ob)) == 0 or max(len(oa), len(ob)) > 20000:
        return list(zip(oa, ob))
    from difflib import SequenceMatcher  # here: rarely needed, and costly to import

    sm = SequenceMatcher(
        None, [ga.subgraph_print[x] for x in oa], [gb.subgraph_print[y] for y in ob], autojunk=False
    )
    out: list[tuple[int, int]] = []
    for _, i1, i2, j1, j2 in sm.get_opcodes():
        out.extend(zip(oa[i1:i2], ob[j1:j2]))
    return out


def _top_down(m: Matching, level: int) -> None:
    """Walk from matched pairs to their operands, pairing compatible free ones.

    Only pairs with a free operand on A's side can add anything (matches only grow), so the
    later levels start from those instead of from every pair.
    """
    ga, gb = m.ga, m.gb
    a_to_b, b_to_a = m.a_to_b, m.b_to_a
    ops_a, ops_b = ga.operands, gb.operands
    sub_a, sub_b = ga.subgraph_print, gb.subgraph_print
    self_a, self_b = ga.self_print, gb.self_print
    opcode_a, opcode_b = ga.opcodes, gb.opcodes
    users_a = ga.users
    # Users of free instructions, found from the few free ones rather than from every pair.
    with_free = {u for x, y in enumerate(a_to_b) if y == -1 for u in users_a[x]}
    work = [(a, a_to_b[a]) for a in sorted(with_free) if a_to_b[a] != -1]
    while work:
        a, b = work.pop()
        oa, ob = ops_a[a], ops_b[b]
        for x, y in zip(oa, ob) if len(oa) == len(ob) else _operand_pairs(ga, gb, a, b):
            if a_to_b[x] != -1 or b_to_a[y] != -1:
                continue
            if not (
                sub_a[x] == sub_b[y]
                or (level >= _SELF and self_a[x] == self_b[y])
                or (level >= _OPCODE and opcode_a[x] == opcode_b[y])
            ):
                continue
            a_to_b[x] = y
            b_to_a[y] = x
            work.append((x, y))


def _bottom_up(m: Matching) -> int:
    ga, gb = m.ga, m.gb
    added = 0
    for b in range(len(gb)):
        if m.b_to_a[b] != -1 or not gb.operands[b]:
            continue
        ops_b = gb.operands[b]
        first = m.b_to_a[ops_b[0]]
        if first == -1:
            continue
        want = [m.b_to_a[y] for y in ops_b]
        if -1 in want:
            continue
        for u in ga.users[first]:
            if (
                m.a_to_b[u] == -1
                and ga.self_print[u] == gb.self_print[b]
                and ga.operands[u] == want
            ):
                m.pair(u, b)
                added += 1
                break
    return added


def _leftovers(m: Matching) -> int:
    ga, gb = m.ga, m.gb
    free_b: dict[int, list[int]] = {}
    sub_b = gb.subgraph_print
    b_to_a = m.b_to_a
    for b in range(len(gb) - 1, -1, -1):
        if b_to_a[b] == UNMATCHED:
            free_b.setdefault(sub_b[b], []).append(b)
    added = 0
    free_a = [a for a, b in enumerate(m.a_to_b) if b == -1]
    for a in sorted(free_a, key=ga.file_pos.__getitem__):
        cands = free_b.get(ga.subgraph_print[a])
        if cands:
            m.pair(a, cands.pop())
            added += 1
    return added


def match(ga: Graph, gb: Graph) -> Matching:
    """Pair the instructions of two graphs by structure (see the module docstring).

    The compiled ``match`` (:mod:`explorer.xla.hlo.kernels`) does the same passes in the same
    order where it is built; :func:`match_python` is the oracle and the fallback.
    """
    compiled = kernels.compiled()
    if compiled is None:
        return match_python(ga, gb)
    m = Matching(ga, gb)
    m.a_to_b, m.b_to_a = compiled.match(
        ga.subgraph_print,
        gb.subgraph_print,
        ga.self_print,
        gb.self_print,
        ga.opcodes,
        gb.opcodes,
        ga.operands,
        gb.operands,
        ga.users,
        ga.file_pos,
        ga.root,
        gb.root,
        lambda a, b: _operand_pairs(ga, gb, a, b),
    )
    return m


def match_python(ga: Graph, gb: Graph) -> Matching:
    """:func:`match` in Python."""
    m = Matching(ga, gb)
    m.pair(ga.root, gb.root)
    count_a = Counter(ga.subgraph_print)
    count_b = Counter(gb.subgraph_print)
    first_b = {p: b for b, p in enumerate(gb.subgraph_print) if count_b[p] == 1}
    a_to_b, b_to_a = m.a_to_b, m.b_to_a
    for a, p in enumerate(ga.subgraph_print):
        if count_a[p] == 1 and p in first_b:
            b = first_b[p]
            if a_to_b[a] == -1 and b_to_a[b] == -1:  # Matching.pair, inline (35,000 calls)
                a_to_b[a] = b
                b_to_a[b] = a
    for _ in range(2):
        for level in (_EXACT, _SELF, _OPCODE):
            _top_down(m, level)
        if not (_bottom_up(m) + _leftovers(m)):
            break
    return m


__all__ = ["UNMATCHED", "Matching", "match", "match_python"]
