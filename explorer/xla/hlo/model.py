"""Typed records for parsed HLO: modules, computations, instructions.

The parser keeps shapes, literals and attribute values as the text XLA printed (minus the
``/*index=N*/`` comments) because the diff compares them as wholes and shows them to people;
only what the matcher needs structurally (operand names, called computations, parameter
numbers, metadata) is pulled out into fields.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from explorer.xla.hlo.slot_record import SlotRecord

#: Attribute keys whose values name other computations.
CALL_KEYS = frozenset(
    {
        "to_apply",
        "calls",
        "condition",
        "body",
        "branch_computations",
        "true_computation",
        "false_computation",
        "called_computations",
        "scatter",
        "select",
        "async_execution_thread",
    }
)
#: Attribute keys that carry no structure (names, provenance): left out of fingerprints.
NON_STRUCTURAL_KEYS = frozenset({"metadata", "control-predecessors", "statistics", "origin"})


class Metadata(NamedTuple):
    """The provenance torch_xla attaches: which aten op and which Python line made this."""

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: Optional[int] = None

    @property
    def source(self) -> str:
        """``file:line`` when known, else the empty string."""
        if self.source_file and self.source_line is not None:
            return f"{self.source_file}:{self.source_line}"
        return self.source_file


NO_METADATA = Metadata()


class HloInstruction(SlotRecord):
    """One HLO instruction; ``line`` is 1-based in the file it came from (0 if implicit).

    Named apart from the schedule vocabulary's :class:`explorer.pipeline.schedules.instructions.Instruction`
    (a pipeline action): this is one line of an XLA graph.
    """

    __slots__ = (
        "name",
        "shape",
        "opcode",
        "operands",
        "attrs",
        "literal",
        "metadata",
        "line",
        "is_root",
        "parameter_number",
        "called",
    )

    def __init__(
        self,
        name: str,
        shape: str,
        opcode: str,
        operands: tuple[str, ...],
        attrs: tuple[tuple[str, str], ...],
        literal: str,
        metadata: Metadata,
        line: int,
        is_root: bool = False,
        parameter_number: Optional[int] = None,
        called: tuple[str, ...] = (),
    ) -> None:
        self.name = name
        self.shape = shape
        self.opcode = opcode
        self.operands = operands
        self.attrs = attrs
        self.literal = literal
        self.metadata = metadata
        self.line = line
        self.is_root = is_root
        self.parameter_number = parameter_number
        self.called = called

    def attr(self, key: str) -> Optional[str]:
        """The raw text of one attribute, or None."""
        for k, v in self.attrs:
            if k == key:
                return v
        return None


class Computation(SlotRecord):
    """A named list of instructions with one root; ``order`` is a topological order."""

    __slots__ = ("name", "is_entry", "line", "instructions", "by_name", "root", "order")

    def __init__(
        self,
        name: str,
        is_entry: bool,
        line: int,
        instructions: Optional[list[HloInstruction]] = None,
        by_name: Optional[dict[str, HloInstruction]] = None,
        root: Optional[HloInstruction] = None,
        order: Optional[list[HloInstruction]] = None,
    ) -> None:
        self.name = name
        self.is_entry = is_entry
        self.line = line
        self.instructions: list[HloInstruction] = [] if instructions is None else instructions
        self.by_name: dict[str, HloInstruction] = {} if by_name is None else by_name
        self.root = root
        self.order: list[HloInstruction] = [] if order is None else order

    @property
    def parameters(self) -> list[HloInstruction]:
        """Parameters sorted by number."""
        numbered = [
            (i.parameter_number, i) for i in self.instructions if i.parameter_number is not None
        ]
        return [i for _, i in sorted(numbered, key=lambda pair: pair[0])]


class Module(SlotRecord):
    """One ``HloModule``: its computations in file order and where it sat in the file."""

    __slots__ = (
        "name",
        "header",
        "computations",
        "entry",
        "first_line",
        "last_line",
        "text",
        "graph_hash",
    )

    def __init__(
        self,
        name: str,
        header: str,
        computations: dict[str, Computation],
        entry: Computation,
        first_line: int,
        last_line: int,
        text: str = "",
        graph_hash: str = "",
    ) -> None:
        self.name = name
        self.header = header
        self.computations = computations
        self.entry = entry
        self.first_line = first_line
        self.last_line = last_line
        self.text = text
        self.graph_hash = graph_hash

    @property
    def instruction_count(self) -> int:
        """Instructions of the entry computation: the graph's own count, the one ``hlo-diff``
        compares and reports (``instructions``) and ``hlo-list`` shows, parameters and constants
        included, the small computations it calls (reductions, fusions) not."""
        return len(self.entry.instructions)

    @property
    def all_instruction_count(self) -> int:
        """Instructions over all the module's computations, called from the entry or not
        (``hlo-list``'s ``all_instructions``)."""
        return sum(len(c.instructions) for c in self.computations.values())

    @property
    def parameter_count(self) -> int:
        """Parameters of the entry computation (the compiled program's inputs)."""
        return len(self.entry.parameters)


def strip_comments(text: str) -> str:
    r"""Drop ``/*index=N*/`` comments, which XLA adds for readability only.

    The same as ``re.sub(r"/\*.*?\*/", "", text)`` on one line, in linear time: the regex
    re-scanned the rest of the line from each of 40,000 unclosed ``/*``.
    """
    if "/*" not in text:
        return text
    out, pos = [], 0
    while True:
        start = text.find("/*", pos)
        end = text.find("*/", start + 2) if start >= 0 else -1
        if end < 0:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos:start])
        pos = end + 2


_BRACKET_GROUP = re.compile(r"\[[^\[\]{}()]*\]|\{[^\[\]{}()]*\}")
_BRACKETS_COMMAS = str.maketrans("", "", "[]{},")


def tuple_arity(shape: str) -> Optional[int]:
    """Number of top-level elements of a tuple shape, or None for an array shape."""
    if not shape.startswith("("):
        return None
    inner = shape[1:-1]
    if shape.endswith(")") and "(" not in inner and ")" not in inner:
        # A tuple of arrays (the usual case, thousands of elements in a root tuple): the commas
        # left once every [dims] and {layout} is cut out are the top-level ones. The same
        # answer as the scan below, in a few passes that run in C.
        top = _BRACKET_GROUP.sub("", inner)
        if not any(c in top for c in "[]{}"):
            content = inner.translate(_BRACKETS_COMMAS)
            seen = (content != "" and not content.isspace()) or inner.count(",") != top.count(",")
            return top.count(",") + 1 if seen else 0
    return _tuple_arity_scan(shape)


def _tuple_arity_scan(shape: str) -> Optional[int]:
    """:func:`tuple_arity` character by character (any nesting)."""
    depth, count, seen = 0, 0, False
    for ch in shape:
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif ch == "," and depth == 1:
            count += 1
        elif depth >= 1 and not ch.isspace():
            seen = True
    return count + 1 if seen else 0


__all__ = [
    "CALL_KEYS",
    "NON_STRUCTURAL_KEYS",
    "Metadata",
    "NO_METADATA",
    "HloInstruction",
    "Computation",
    "Module",
    "strip_comments",
    "tuple_arity",
]
