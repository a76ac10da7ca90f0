"""An entry computation's body read straight into a :class:`Graph`, without instruction records.

Why: ``explorer hlo-diff`` on two 35,000-instruction modules spent most of its time making an
:class:`HloInstruction` per line and then flattening those into the graph's lists. Here one
compiled regular expression reads every line of the body in one ``findall`` (in C), the columns
come out of its rows by ``zip``, every operand name is found by one more ``findall`` over all
operand lists at once, and only the fingerprint chain (a subgraph's id needs its operands') is
a Python loop. Instruction records are made later, only for the few a diff reports.

The answer must be the careful reader's. A line the common-line regex does not take, or whose
literal or tail only the careful path reads, is read by :func:`parse_hlo_line`, as the reader
would read it. Whatever the reader would refuse or read another way (a repeated name, an
operand defined later, two ROOTs, a repeated parameter number or a gap in the numbers, a call
to a computation that is not there, a header parameter the body does not define) makes
:func:`flat_graph` return None, and the caller reads the text the careful way, which answers or
names the error as before.
"""

from __future__ import annotations

import re
from itertools import islice, repeat
from operator import add, itemgetter
from types import ModuleType
from typing import Optional, Sequence

from explorer.xla.hlo import kernels
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.fingerprint import Interner, attr_text
from explorer.xla.hlo.graph import Graph
from explorer.xla.hlo.lines import (
    careful_tail,
    fast_line_pattern,
    fast_literal,
    parse_hlo_line,
    rest_tail,
)
from explorer.xla.hlo.model import HloInstruction, Metadata

#: One row per line: the common-line groups, or all empty when the line is something else.
_ROW = re.compile("^(?:" + fast_line_pattern(r"\n") + "|.*)$", re.M)
#: Operand names in the two usual operand lists (``%a, %b`` and ``f32[2]{0} %a, f32[] %b``).
_OPERAND = re.compile(r"%([^,\n%]+)")

Tail = tuple[Metadata, tuple, tuple]


class _Careful(Exception):
    """The careful reader must answer (it may refuse the text, or read it in another order)."""


class _Columns:
    """The per-line fields of a body, one list each, as the regex rows gave them."""

    def __init__(self, body: str, rows: list[tuple[str, ...]]) -> None:
        roots, names, shapes, opcodes, inners, plain, shaped, rests = map(list, zip(*rows))
        self.body = body
        self.roots: list[str] = roots
        self.names: list[str] = names
        self.shapes: list[str] = shapes
        self.opcodes: list[str] = opcodes
        self.inners: list[str] = inners
        self.operand_text: list[str] = list(map(add, plain, shaped))
        self.rests: list[str] = rests
        self.literals: list[str] = [""] * len(rows)
        self.numbers: list[Optional[int]] = [None] * len(rows)
        #: The tail of each distinct text after an operand list (None: the careful path reads it).
        self.tail_of: dict[str, Optional[Tail]] = {r: rest_tail(r) for r in dict.fromkeys(rests)}
        #: Lines the careful path read, by position.
        self.careful: dict[int, HloInstruction] = {}


def flat_graph(
    body: str,
    first_line: int,
    module_name: str,
    hashes: dict[str, str],
    callees: set[str],
    header_params: list[str],
    interner: Interner,
) -> Optional[Graph]:
    """The entry graph of ``body`` (its lines, the first numbered ``first_line``), or None.

    ``hashes`` are the called computations' fingerprints from ``interner``, ``callees`` the
    names an instruction may call, ``header_params`` the parameters the entry's header lists.
    With ``interner.keys`` set (a compiled ``KeyTable``) the compiled reader reads the body.
    """
    compiled = kernels.compiled()
    if interner.keys is not None and compiled is not None:
        args = (body, first_line, module_name, hashes, callees, header_params)
        return _compiled_graph(compiled, *args, interner.keys)
    rows = _ROW.findall(body)
    if not rows or len(rows) != body.count("\n") + 1:
        return None
    cols = _Columns(body, rows)
    try:
        tails = _read_lines(cols, first_line)
        index = dict(zip(cols.names, range(len(rows))))
        if len(index) != len(rows) or not all(map(index.__contains__, header_params)):
            raise _Careful
        operands = _operands(cols, index)
        _check_calls(cols, callees)
        selfs = _self_ids(cols, hashes, interner)
        subs, users = _chain(selfs, operands, interner)
        root = _root(cols)
        parameters = _parameter_count(cols.numbers)
    except (_Careful, HloParseError):
        return None
    n = len(rows)
    lines = list(range(first_line, first_line + n))
    metadata = list(map(itemgetter(0), tails))
    return Graph(
        name=module_name,
        parameter_count=parameters,
        insts=LazyInstructions(
            cols.names,
            cols.shapes,
            cols.opcodes,
            cols.literals,
            cols.numbers,
            cols.roots,
            cols.careful,
            tails,
            operands,
            lines,
        ),
        names=cols.names,
        opcodes=cols.opcodes,
        shapes=cols.shapes,
        literals=cols.literals,
        numbers=cols.numbers,
        metadata=metadata,
        lines=lines,
        operands=operands,
        users=users,
        self_print=selfs,
        subgraph_print=subs,
        file_pos=list(range(n)),
        root=root,
    )


def _read_lines(cols: _Columns, first_line: int) -> list[Tail]:
    """Each line's tail; constants, parameters and uncommon lines read one by one."""
    tails: list = list(map(cols.tail_of.__getitem__, cols.rests))
    special = [
        k
        for k, (name, opcode, inner, ops, tail) in enumerate(
            zip(cols.names, cols.opcodes, cols.inners, cols.operand_text, tails)
        )
        if not name
        or tail is None
        or opcode == "constant"
        or opcode == "parameter"
        or (inner and not ops)
    ]
    lines: Optional[list[str]] = None
    for k in special:
        cols.operand_text[k] = ""  # a constant's literal is no operand list, whatever it looks like
        opcode = cols.opcodes[k]
        if cols.names[k] and tails[k] is not None and opcode in ("constant", "parameter"):
            read = fast_literal(opcode, cols.inners[k])
            if read is not None:
                cols.literals[k], cols.numbers[k] = read
                continue
        if lines is None:
            lines = cols.body.split("\n")
        inst = parse_hlo_line(lines[k], first_line + k)
        cols.careful[k] = inst
        cols.roots[k] = "ROOT" if inst.is_root else ""
        cols.names[k], cols.shapes[k], cols.opcodes[k] = inst.name, inst.shape, inst.opcode
        cols.literals[k], cols.numbers[k] = inst.literal, inst.parameter_number
        tails[k] = (inst.metadata, inst.attrs, inst.called)
    return tails


def _operands(cols: _Columns, index: dict[str, int]) -> list[list[int]]:
    """Operand indices per line: one ``findall`` over every common operand list at once."""
    counts = list(map(str.count, cols.operand_text, repeat("%")))
    found = _OPERAND.findall("\n".join(cols.operand_text))
    if len(found) != sum(counts):
        raise _Careful
    try:
        flat = list(map(index.__getitem__, found))
        operands = list(map(list, map(islice, repeat(iter(flat)), counts)))
        for k, inst in cols.careful.items():
            operands[k] = [index[name] for name in inst.operands]
    except KeyError:  # an operand no line of the body defines
        raise _Careful from None
    return operands


def _check_calls(cols: _Columns, callees: set[str]) -> None:
    """Every called computation exists (and is not the entry: that would be a cycle)."""
    tails = [t for t in cols.tail_of.values() if t is not None]
    for _, _, called in tails + [(i.metadata, i.attrs, i.called) for i in cols.careful.values()]:
        if called and not callees.issuperset(called):
            raise _Careful


def _self_ids(cols: _Columns, hashes: dict[str, str], interner: Interner) -> list[int]:
    """Self fingerprint ids: the key text of :func:`entry_graph`, interned once per text."""
    text_of = {
        rest: attr_text(tail[1], hashes) if tail[1] else ""
        for rest, tail in cols.tail_of.items()
        if tail is not None
    }
    attrs = list(map(text_of.get, cols.rests, repeat("")))
    for k, inst in cols.careful.items():
        attrs[k] = attr_text(inst.attrs, hashes) if inst.attrs else ""
    mids = ["" if op == "parameter" else "|" + lit for op, lit in zip(cols.opcodes, cols.literals)]
    keys = list(map("".join, zip(cols.opcodes, repeat("|"), cols.shapes, mids, attrs)))
    ids = interner.graph_ids
    for key in dict.fromkeys(keys):
        if key not in ids:
            ids[key] = len(ids)
    return list(map(ids.__getitem__, keys))


def _chain(
    selfs: list[int], operands: list[list[int]], interner: Interner
) -> tuple[list[int], list[list[int]]]:
    """Subgraph ids and users, operands first; an operand defined later is for the careful path."""
    ids = interner.graph_ids
    get = ids.get
    subs: list[int] = []
    append = subs.append
    users: list[list[int]] = [[] for _ in selfs]
    try:
        for k, (own, ops) in enumerate(zip(selfs, operands)):
            if not ops:
                append(own)
                continue
            if len(ops) == 1:
                o = ops[0]
                key: tuple = (own, subs[o])
                users[o].append(k)
            else:
                key = (own, *map(subs.__getitem__, ops))
                for o in dict.fromkeys(ops):
                    users[o].append(k)
            sub = get(key)
            if sub is None:
                sub = ids[key] = len(ids)
            append(sub)
    except IndexError:  # subs[o] with o >= k: not in file order, or a cycle
        raise _Careful from None
    return subs, users


def _root(cols: _Columns) -> int:
    marked = [k for k, r in enumerate(cols.roots) if r]
    if len(marked) > 1:
        raise _Careful
    return marked[0] if marked else len(cols.roots) - 1


def _parameter_count(numbers: list[Optional[int]]) -> int:
    """How many parameters; numbers repeated or with a gap (XLA numbers them 0 to n-1) are
    the careful reader's to name."""
    used = [x for x in numbers if x is not None]
    if len(set(used)) != len(used) or (used and max(used) != len(used) - 1):
        raise _Careful
    return len(used)


def _compiled_graph(
    compiled: ModuleType,
    body: str,
    first_line: int,
    module_name: str,
    hashes: dict[str, str],
    callees: set[str],
    header_params: list[str],
    keys: object,
) -> Optional[Graph]:
    """:func:`flat_graph` with the compiled reader (``_kernels.c``): the same graph, or None.

    The C side reads the lines the common-line regex reads, and only those it reads the same
    way, and some the careful parser reads (tuple shapes, index comments), only where that
    regex would not; the Python side reads each distinct tail once, as the parser that reads
    its line would (:func:`rest_tail`, :func:`careful_tail`), and every other line with the
    careful line parser; the C side then numbers, checks and fingerprints
    them as :func:`flat_graph` does, and hands back None where that would.
    """
    scan = compiled.scan_body(body)
    tails: list[Optional[Tail]] = list(map(rest_tail, scan.rests()))
    tails += map(careful_tail, scan.careful_rests())
    careful: dict[int, HloInstruction] = {}
    at = scan.careful([r for r, tail in enumerate(tails) if tail is None])
    if at:
        lines = body.split("\n")
        try:
            for k in at:
                careful[k] = parse_hlo_line(lines[k], first_line + k)
        except HloParseError:
            return None
    read = [tail for tail in tails if tail is not None]
    for called in [t[2] for t in read] + [inst.called for inst in careful.values()]:
        if called and not callees.issuperset(called):
            return None
    texts = [
        None if tail is None else attr_text(tail[1], hashes) if tail[1] else "" for tail in tails
    ]
    specials = [
        (
            k,
            i.name,
            i.shape,
            i.opcode,
            i.literal,
            i.parameter_number,
            i.is_root,
            i.operands,
            attr_text(i.attrs, hashes) if i.attrs else "",
        )
        for k, i in careful.items()
    ]
    metas = [None if tail is None else tail[0] for tail in tails]
    built = scan.build(keys, texts, specials, header_params, metas)
    if built is None:
        return None
    names, opcodes, shapes, literals, numbers, operands, users, selfs, subs = built[:9]
    root, parameters, marked, rest_index, metadata = built[9:]
    n = len(names)
    for k, inst in careful.items():
        metadata[k] = inst.metadata
    line_numbers = list(range(first_line, first_line + n))
    roots = [False] * n
    if marked >= 0:
        roots[marked] = True
    return Graph(
        name=module_name,
        parameter_count=parameters,
        insts=LazyInstructions(
            names,
            shapes,
            opcodes,
            literals,
            numbers,
            roots,
            careful,
            _TailsByLine(rest_index, tails),
            operands,
            line_numbers,
        ),
        names=names,
        opcodes=opcodes,
        shapes=shapes,
        literals=literals,
        numbers=numbers,
        metadata=metadata,
        lines=line_numbers,
        operands=operands,
        users=users,
        self_print=selfs,
        subgraph_print=subs,
        file_pos=list(range(n)),
        root=root,
    )


class _TailsByLine:
    """Each line's tail, looked up when asked for: its index among the distinct tails (-1 for a
    line the careful parser read, which :class:`LazyInstructions` answers itself)."""

    def __init__(self, index: Sequence[int], tails: list[Optional[Tail]]) -> None:
        self._index, self._tails = index, tails

    def __getitem__(self, k: int) -> Tail:
        tail = self._tails[self._index[k]]
        assert tail is not None  # a refused tail's lines are careful lines
        return tail


class LazyInstructions:
    """The instructions of a flat graph, each made when first asked for (a diff asks for few).

    The columns are the graph's; ``roots`` holds a true value where a line is marked ROOT,
    ``careful`` the lines the careful parser read (given back as read), ``tails`` each line's
    (metadata, attributes, called computations).
    """

    def __init__(
        self,
        names: Sequence[str],
        shapes: list[str],
        opcodes: list[str],
        literals: list[str],
        numbers: list[Optional[int]],
        roots: Sequence[object],
        careful: dict[int, HloInstruction],
        tails: Sequence[Tail] | _TailsByLine,
        operands: list[list[int]],
        lines: list[int],
    ) -> None:
        self._names, self._shapes, self._opcodes = names, shapes, opcodes
        self._literals, self._numbers, self._roots = literals, numbers, roots
        self._careful, self._tails, self._operands, self._lines = careful, tails, operands, lines

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, k: int) -> HloInstruction:
        if k in self._careful:
            return self._careful[k]
        metadata, attrs, called = self._tails[k]
        names = self._names
        return HloInstruction(
            names[k],
            self._shapes[k],
            self._opcodes[k],
            tuple(map(names.__getitem__, self._operands[k])),
            attrs,
            self._literals[k],
            metadata,
            self._lines[k],
            bool(self._roots[k]),
            self._numbers[k],
            called,
        )


__all__ = ["LazyInstructions", "flat_graph"]
