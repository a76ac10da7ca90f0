"""Typed records of an HLO diff, consumed alike by the summary, the views, the CLI and tests."""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

from explorer.xla.hlo.slot_record import SlotRecord


class ParameterMove(NamedTuple):
    """Entry parameter ``index_a`` of A is parameter ``index_b`` of B (a compile-cache key change)."""

    index_a: int
    index_b: int
    shape: str
    op_name: str
    name_a: str
    name_b: str


class InstructionGroup(NamedTuple):
    """Instructions present on one side only, grouped by where they came from."""

    side: str  # "added" (only in B) or "removed" (only in A)
    op_type: str
    op_name: str
    source: str
    count: int
    opcodes: tuple[tuple[str, int], ...]
    names: tuple[str, ...]
    lines: tuple[int, ...]

    @property
    def label(self) -> str:
        """``op_type`` (and the source line when present), for tables and sentences."""
        where = f" at {self.source}" if self.source else ""
        return f"{self.op_type or '(no metadata)'}{where}"


class ChangedInstruction(NamedTuple):
    """A matched pair that differs in ``kinds`` (opcode, shape, literal, attributes, operands)."""

    name_a: str
    name_b: str
    kinds: tuple[str, ...]
    before: str
    after: str
    op_type: str
    op_name: str
    line_a: int
    line_b: int


class MovedConstant(NamedTuple):
    """A constant present on both sides at a different place in the order or with other users."""

    literal: str
    shape: str
    op_type: str
    op_name: str
    name_a: str
    name_b: str
    line_a: int
    line_b: int
    users_changed: bool


class TupleArityChange(NamedTuple):
    """A matched tuple-shaped instruction whose element count changed."""

    name_a: str
    name_b: str
    opcode: str
    arity_a: int
    arity_b: int


class HloDiff(SlotRecord):
    """Everything that differs between two modules, plus what matched."""

    __slots__ = (
        "module_a",
        "module_b",
        "instructions_a",
        "instructions_b",
        "matched_count",
        "parameter_permutation",
        "parameters_a",
        "parameters_b",
        "added",
        "removed",
        "changed",
        "moved_constants",
        "tuple_arity",
        "pairs",
        "summary",
        "parameter_order_kept",
    )
    _not_shown = frozenset({"pairs"})

    def __init__(
        self,
        module_a: str,
        module_b: str,
        instructions_a: int,
        instructions_b: int,
        matched_count: int,
        parameter_permutation: list[ParameterMove],
        parameters_a: int,
        parameters_b: int,
        added: list[InstructionGroup],
        removed: list[InstructionGroup],
        changed: list[ChangedInstruction],
        moved_constants: list[MovedConstant],
        tuple_arity: list[TupleArityChange],
        pairs: Optional[list[tuple[str, str]]] = None,
        summary: str = "",
        parameter_order_kept: bool = True,
    ) -> None:
        self.module_a = module_a
        self.module_b = module_b
        self.instructions_a = instructions_a
        self.instructions_b = instructions_b
        self.matched_count = matched_count
        self.parameter_permutation = parameter_permutation
        self.parameters_a = parameters_a
        self.parameters_b = parameters_b
        self.added = added
        self.removed = removed
        self.changed = changed
        self.moved_constants = moved_constants
        self.tuple_arity = tuple_arity
        self.pairs: list[tuple[str, str]] = [] if pairs is None else pairs
        self.summary = summary
        #: The matched parameters keep their relative order: the moves are shifts around
        #: parameters added or removed (an insertion renumbers all after it), not a reordering.
        self.parameter_order_kept = parameter_order_kept

    @property
    def identical(self) -> bool:
        """No difference of any kind (constant order aside)."""
        return not (
            self.parameter_permutation
            or self.added
            or self.removed
            or self.changed
            or self.tuple_arity
            or self.parameters_a != self.parameters_b
        )

    def to_json(self) -> dict[str, Any]:
        """The CLI's ``--json`` shape: summary, parameter_permutation as [[i_a, i_b], ...], ..."""
        return {
            "module_a": self.module_a,
            "module_b": self.module_b,
            # the verdict the exit code gives (0: identical), so a reader of the JSON has it too
            "identical": self.identical,
            "summary": self.summary,
            "parameter_permutation": [[p.index_a, p.index_b] for p in self.parameter_permutation],
            "parameters": _plain_list(self.parameter_permutation),
            "added": [_group_json(g) for g in self.added],
            "removed": [_group_json(g) for g in self.removed],
            "changed": _plain_list(self.changed),
            "moved_constants": _plain_list(self.moved_constants),
            "tuple_arity": _plain_list(self.tuple_arity),
            "matched_count": self.matched_count,
            "instructions": [self.instructions_a, self.instructions_b],
        }


def _plain_list(records: list) -> list[dict[str, Any]]:
    """Each flat record as a dict of its fields, in field order (their fields are strings,
    numbers and tuples of them), made without a deep copy, which took a fifth of a large
    diff's run when ``dataclasses.asdict`` made it."""
    if not records:
        return []
    names = records[0]._fields
    return [dict(zip(names, r)) for r in records]


def _group_json(g: InstructionGroup) -> dict[str, Any]:
    out: dict[str, Any] = _plain_list([g])[0]
    out["opcodes"] = dict(g.opcodes)
    return out


__all__ = [
    "ParameterMove",
    "InstructionGroup",
    "ChangedInstruction",
    "MovedConstant",
    "TupleArityChange",
    "HloDiff",
]
