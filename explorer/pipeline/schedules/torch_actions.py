"""PyTorch's pipelining action vocabulary, in one place: one record, one parse, one format.

``torch.distributed.pipelining`` names every action ``<stage><type><micro-batch>`` (``2F0``,
``1SEND_F3``, ``0UNSHARD`` without a micro-batch) and an overlapped pair as
``(0F1;1B0)OVERLAP_F_B``. Its runtime labels each action ``PP:<text>`` in the profiler, its
``_dump_csv`` writes the text one rank per row (an idle step as an empty cell) and its
``_load_csv`` reads it back. The adapters, the Chrome-trace reader and the PyTorch engine all
speak this text; they all go through :func:`parse_action` and :func:`format_action` here, so a
spelling changes in one place and the round trip is tested once.

Written from the format, not from torch's code: no torch import. Unlike PyTorch's own parser
(which reads a prefix: ``2F0x`` passes as ``2F0``) a whole string must match, so a typo is an
error that names it rather than a silently different action.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache
from typing import Any, NamedTuple, Optional

from explorer.cli_options import MAX_MICROBATCHES, MAX_STAGES
from explorer.errors import InputError, excerpt
from explorer.pipeline.schedules.instructions import Kind


class ActionType(str, Enum):
    """PyTorch's ``_ComputationType`` by its text (the value is what ``str(action)`` prints)."""

    FORWARD = "F"
    FULL_BACKWARD = "B"
    BACKWARD_INPUT = "I"
    BACKWARD_WEIGHT = "W"
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"
    UNSHARD = "UNSHARD"
    RESHARD = "RESHARD"
    OVERLAP_F_B = "OVERLAP_F_B"

    def __str__(self) -> str:
        return self.value

    @property
    def kind(self) -> Optional[Kind]:
        """The explorer's instruction kind, or None (``UNSHARD``, ``RESHARD``, ``OVERLAP_F_B``)."""
        return KIND_BY_TYPE.get(self)

    @property
    def is_compute(self) -> bool:
        return self in _COMPUTE


KIND_BY_TYPE: dict[ActionType, Kind] = {
    ActionType.FORWARD: Kind.FORWARD,
    ActionType.FULL_BACKWARD: Kind.BACKWARD,
    ActionType.BACKWARD_INPUT: Kind.BACKWARD_INPUT,
    ActionType.BACKWARD_WEIGHT: Kind.BACKWARD_WEIGHT,
    ActionType.SEND_F: Kind.SEND_ACTIVATION,
    ActionType.RECV_F: Kind.RECV_ACTIVATION,
    ActionType.SEND_B: Kind.SEND_GRAD,
    ActionType.RECV_B: Kind.RECV_GRAD,
}
TYPE_BY_KIND: dict[Kind, ActionType] = {kind: t for t, kind in KIND_BY_TYPE.items()}
_COMPUTE = frozenset(
    {
        ActionType.FORWARD,
        ActionType.FULL_BACKWARD,
        ActionType.BACKWARD_INPUT,
        ActionType.BACKWARD_WEIGHT,
        ActionType.OVERLAP_F_B,
    }
)
# Longest names first, so ``SEND_F`` is never read as stage digits followed by ``S``.
_TYPES = "|".join(sorted((t.value for t in ActionType), key=len, reverse=True))
_SINGLE = re.compile(rf"(\d+)({_TYPES})(\d*)")
_GROUP = re.compile(rf"\((.*)\)({_TYPES})")


class TorchAction(NamedTuple):
    """One action: ``stage`` (-1 for an overlapped pair), type, micro-batch (None: none), parts."""

    stage: int
    type: ActionType
    microbatch: Optional[int] = None
    sub_actions: Optional[tuple["TorchAction", ...]] = None

    def __str__(self) -> str:
        return format_action(self)

    @property
    def kind(self) -> Optional[Kind]:
        return KIND_BY_TYPE.get(self.type)

    @property
    def parts(self) -> tuple["TorchAction", ...]:
        """The actions this one runs, in order: its sub-actions, or itself."""
        return self.sub_actions or (self,)

    @staticmethod
    def of(stage: int, kind: Kind, microbatch: Optional[int]) -> "TorchAction":
        """The PyTorch action for an explorer instruction kind (InputError for kinds PyTorch lacks)."""
        t = TYPE_BY_KIND.get(kind)
        if t is None:
            raise InputError(
                f"{kind.name} has no torch.distributed.pipelining action; "
                f"PyTorch's are {', '.join(k.name for k in TYPE_BY_KIND)}"
            )
        return TorchAction(stage, t, None if microbatch is None or microbatch < 0 else microbatch)


def format_action(action: TorchAction) -> str:
    """PyTorch's text for an action: ``2F0``, ``0UNSHARD``, ``(0F1;1B0)OVERLAP_F_B``."""
    if action.sub_actions is not None:
        return f"({';'.join(format_action(a) for a in action.sub_actions)}){action.type.value}"
    mb = "" if action.microbatch is None else str(action.microbatch)
    return f"{action.stage}{action.type.value}{mb}"


def parse_action(text: str) -> Optional[TorchAction]:
    """The action a text names; None for an empty cell (an idle step); InputError otherwise."""
    s = text.strip()
    if not s:
        return None
    return _parse_stripped(s, text)


@lru_cache(maxsize=1 << 16)
def _parse_stripped(s: str, text: str) -> TorchAction:
    """:func:`parse_action` of a non-empty stripped text, remembered: an order names the same
    few actions on every row, and the answer is immutable (a refusal raises, and is not kept)."""
    group = _GROUP.fullmatch(s)
    if group:
        parts = tuple(a for a in (parse_action(p) for p in group[1].split(";")) if a is not None)
        return TorchAction(-1, ActionType(group[2]), None, parts or None)
    m = _SINGLE.fullmatch(s)
    if not m:
        raise InputError(
            f"cannot read pipelining action {excerpt(text)}: expected <stage><type><micro-batch> "
            f"like 2F0, 1SEND_F3 or 0UNSHARD (types {', '.join(t.value for t in ActionType)})"
        )
    action = TorchAction(_number(m[1]), ActionType(m[2]), _number(m[3]) if m[3] else None)
    check_numbers(action, text)
    return action


def _number(digits: str) -> int:
    """A run of digits as a number; one longer than any limit reads as a number past them all,
    never through ``int`` (which refuses 4,300 digits with an error that is no user's message)."""
    digits = digits.lstrip("0") or "0"
    return int(digits) if len(digits) <= 12 else 10**12


#: What a number in an action may reach: the limits of ``--stages`` and ``--microbatches``.
_LIMITS = {
    "stage": (MAX_STAGES, "stages", "--stages"),
    "micro-batch": (MAX_MICROBATCHES, "micro-batches", "--microbatches"),
}


def check_numbers(action: TorchAction, text: Optional[str] = None) -> None:
    """Refuse a stage or micro-batch number beyond what ``--stages`` and ``--microbatches`` accept.

    An order's sizes are its largest numbers plus one, and tables are allocated at those sizes:
    one action ``0F10000000`` would allocate ten million buffers and ``99999999F0`` list a
    hundred million idle stages. Every action read or converted here is held to the options' own
    limits before anything is sized by it, so an order and the options refuse the same schedules.
    """
    for part in action.parts:
        for what, value in (("stage", part.stage), ("micro-batch", part.microbatch)):
            limit, plural, option = _LIMITS[what]
            if value is not None and value >= limit:
                raise InputError(
                    f"pipelining action {excerpt(text or format_action(action))}: its {what} is "
                    f"beyond the limit of {limit:,} {plural} (0..{limit - 1:,}) that {option} has, "
                    f"as the analyses hold every instruction in memory; use fewer {plural}"
                )


def to_action(obj: Any) -> Optional[TorchAction]:
    """An action from its text, a :class:`TorchAction`, or PyTorch's own ``_Action`` (duck-typed)."""
    if obj is None:
        return None
    if isinstance(obj, TorchAction):
        check_numbers(obj)
        return obj
    if isinstance(obj, str):
        return parse_action(obj)
    stage = getattr(obj, "stage_index", None)
    ctype = getattr(obj, "computation_type", None)
    if stage is None or ctype is None:
        raise InputError(
            f"{excerpt(repr(obj))} is not a pipelining action (needs stage_index and computation_type)"
        )
    subs = getattr(obj, "sub_actions", None)
    try:
        t = ActionType(str(ctype))
    except ValueError:
        raise InputError(
            f"{excerpt(repr(obj))}: unknown computation type {excerpt(str(ctype))}"
        ) from None
    mb = getattr(obj, "microbatch_index", None)
    parts = tuple(a for a in (to_action(s) for s in subs) if a is not None) if subs else None
    action = TorchAction(int(stage), t, None if mb is None else int(mb), parts or None)
    check_numbers(action)
    return action


__all__ = [
    "KIND_BY_TYPE",
    "TYPE_BY_KIND",
    "ActionType",
    "TorchAction",
    "check_numbers",
    "format_action",
    "parse_action",
    "to_action",
]
