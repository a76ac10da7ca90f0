"""Structural fingerprints: hashes that ignore names, ``.N`` suffixes and line order.

An instruction's *self* fingerprint covers what it is (opcode, shape, literal, structural
attributes, and the fingerprints of the computations it calls); its *subgraph* fingerprint
adds the subgraph fingerprints of its operands, in operand order. Two instructions with equal
subgraph fingerprints compute the same thing from the same kinds of inputs, which is the
first and strongest matching signal (as in OpenXLA's ``hlo_diff``).

Entry parameters are fingerprinted without their number so that a permuted parameter still
matches; the permutation is then reported, not hidden. Hashes are blake2b so they are stable
across processes (a fingerprint printed by ``hlo-list`` today means the same tomorrow); the
matcher, which only compares two modules in one process, uses an :class:`Interner` instead:
exact (no collisions) and several times faster than hashing 70,000 keys.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from explorer.xla.hlo.model import (
    CALL_KEYS,
    NON_STRUCTURAL_KEYS,
    Computation,
    HloInstruction,
    Module,
)
from explorer.xla.hlo.slot_record import SlotRecord

_CALL_NAME = re.compile(r"%?([A-Za-z_][\w.\-]*)")


def stable_hash(text: str) -> str:
    """16 hex digits, the same in every process."""
    from hashlib import blake2b  # here: a diff never calls it, and OpenSSL's import is not free

    return blake2b(text.encode(), digest_size=8).hexdigest()


class Interner(SlotRecord):
    """Equal keys get equal short ids; share one between the two modules being compared.

    ``table`` gives texts short hexadecimal ids (they go into other texts). ``graph_ids`` is
    the entry graphs' own table: integer ids for self-key texts and for subgraph keys, tuples
    of ids (its own id, then its operands'), which never equal a text. ``keys`` is the same
    table in C, for the compiled reader.
    """

    __slots__ = ("table", "graph_ids", "keys")

    def __init__(
        self,
        table: Optional[dict[str, str]] = None,
        graph_ids: Optional[dict] = None,
        keys: object = None,
    ) -> None:
        self.table: dict[str, str] = {} if table is None else table
        self.graph_ids: dict = {} if graph_ids is None else graph_ids
        #: A compiled ``KeyTable`` (:mod:`explorer.xla.hlo.kernels`): when set, graphs read
        #: from text take their ids from it instead of ``graph_ids`` (both graphs of a diff
        #: must use the same).
        self.keys = keys

    def __call__(self, key: str) -> str:
        got = self.table.get(key)
        if got is None:
            got = self.table[key] = format(len(self.table), "x")
        return got


def structural_attrs(inst: HloInstruction, comp_names: dict[str, str], marker: str) -> list[str]:
    """``key=value`` for the attributes that define the computation (no metadata), with each
    called computation (``to_apply=``, ``calls=``...) named ``marker + comp_names[name]``, so
    renumbered computations compare equal. The canonical text and the fingerprints share it."""
    return _structural(inst.attrs, comp_names, marker)


def _structural(
    attrs: tuple[tuple[str, str], ...], comp_names: dict[str, str], marker: str
) -> list[str]:
    out = []
    for key, value in attrs:
        if key in NON_STRUCTURAL_KEYS:
            continue
        if key in CALL_KEYS:
            value = _CALL_NAME.sub(lambda m: marker + comp_names.get(m.group(1), m.group(1)), value)
        out.append(f"{key}={value}")
    return out


def self_key(inst: HloInstruction, comp_hashes: dict[str, str], with_number: bool) -> str:
    """The text an instruction's self fingerprint is the hash of."""
    parts = [inst.opcode, inst.shape]
    if inst.opcode != "parameter" or with_number:
        parts.append(inst.literal)
    parts.extend(structural_attrs(inst, comp_hashes, "#"))
    return "|".join(parts)


class ComputationPrints(SlotRecord):
    """Self and subgraph fingerprints of one computation's instructions, by name."""

    __slots__ = ("self_print", "subgraph_print", "root_print")

    def __init__(
        self, self_print: dict[str, str], subgraph_print: dict[str, str], root_print: str
    ) -> None:
        self.self_print = self_print
        self.subgraph_print = subgraph_print
        self.root_print = root_print


#: ``|key=value`` text of attribute tuples that call no computation (so the text depends on the
#: tuple alone). The parser shares one tuple among the many lines with the same tail.
_ATTR_TEXT: dict[tuple, str] = {}


def attr_text(attrs: tuple[tuple[str, str], ...], comp_hashes: dict[str, str]) -> str:
    """What :func:`self_key` appends for an instruction's ``attrs``: ``|`` and each structural
    attribute (taking the attributes, not the instruction, so a graph read straight from text
    needs no instruction record)."""
    text = _ATTR_TEXT.get(attrs)
    if text is not None:
        return text
    parts = _structural(attrs, comp_hashes, "#")
    text = "".join(["|" + p for p in parts])
    if not any(key in CALL_KEYS for key, _ in attrs):
        if len(_ATTR_TEXT) > 100_000:
            _ATTR_TEXT.clear()
        _ATTR_TEXT[attrs] = text
    return text


def computation_prints(
    comp: Computation,
    comp_hashes: dict[str, str],
    with_numbers: bool,
    hasher: Callable[[str], str] = stable_hash,
) -> ComputationPrints:
    """Fingerprints of every instruction of ``comp`` (operands first, so one pass).

    Builds the text :func:`self_key` defines without calling it per instruction: the attribute
    part is cached per attribute tuple, and an :class:`Interner`'s table answers most lookups
    without a Python call.
    """
    known = hasher.table if isinstance(hasher, Interner) else {}
    selfs: dict[str, str] = {}
    subs: dict[str, str] = {}
    for inst in comp.order:
        opcode = inst.opcode
        if with_numbers or opcode != "parameter":
            key = opcode + "|" + inst.shape + "|" + inst.literal
        else:
            key = opcode + "|" + inst.shape
        if inst.attrs:
            key += attr_text(inst.attrs, comp_hashes)
        own = known.get(key) or hasher(key)
        name = inst.name
        selfs[name] = own
        operands = inst.operands
        if operands:
            key = own + "(" + ",".join([subs[o] for o in operands]) + ")"
            subs[name] = known.get(key) or hasher(key)
        else:
            subs[name] = own
    assert comp.root is not None
    return ComputationPrints(selfs, subs, subs[comp.root.name])


def computation_hashes(
    module: Module, include_entry: bool = True, hasher: Callable[[str], str] = stable_hash
) -> dict[str, str]:
    """A fingerprint per computation, callees first; includes parameter numbers and dead code.

    ``hasher`` is :func:`stable_hash` for fingerprints shown to people; a diff passes its
    :class:`Interner` (exact, and equal texts get equal ids, which is all a diff compares).
    """
    done: dict[str, str] = {}

    def visit(name: str) -> None:
        stack = [name]
        while stack:
            cur = stack[-1]
            comp = module.computations[cur]
            todo = [c for i in comp.instructions for c in i.called if c not in done]
            if todo:
                stack.extend(todo)
                continue
            stack.pop()
            if cur in done:
                continue
            prints = computation_prints(comp, done, with_numbers=True, hasher=hasher)
            dead = sorted(prints.subgraph_print.values())
            done[cur] = hasher(prints.root_print + ":" + ",".join(dead))

    for name in module.computations:
        if name not in done and (include_entry or name != module.entry.name):
            visit(name)
    return done


def module_fingerprint(module: Module) -> str:
    """The structural identity of a module: equal iff same program with the same parameter order."""
    return computation_hashes(module)[module.entry.name]


__all__ = [
    "stable_hash",
    "Interner",
    "structural_attrs",
    "attr_text",
    "self_key",
    "ComputationPrints",
    "computation_prints",
    "computation_hashes",
    "module_fingerprint",
]
