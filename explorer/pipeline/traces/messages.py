"""What a point-to-point message carried, as its ``instr`` line records it (pure, no torch).

Every send and receive line of the explorer's engine carries ``"p2p"``: one short string per
element of the tensor tuple, in order (the list index is the tuple index)::

    "float32[4,8,32]*"    dtype, shape, and "*" when the tensor requires a gradient

The number of elements is the product of the shape, so it is not written twice. A receive
line also says where its buffer came from: no ``"reused"`` key when the buffer was freshly
allocated for this message, ``"reused": [iteration, step]`` when it is a pooled buffer first
filled by the receive at that step. A send records the tensors it sent; a receive records the
buffer it received into: the two sides of the contract the analysis compares.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Optional

_TENSOR = re.compile(r"([a-z][a-z0-9_]*)\[((?:\d+(?:,\d+)*)?)\](\*?)")


@dataclass(frozen=True)
class TensorMeta:
    """One element of a message's tuple: its dtype, shape and whether it requires a gradient."""

    dtype: str
    shape: tuple[int, ...]
    requires_grad: bool = False

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.shape))}]"

    def encode(self) -> str:
        """The form written on an ``instr`` line (see the module docstring)."""
        return str(self) + ("*" if self.requires_grad else "")


def parse_tensor(text: str) -> TensorMeta:
    """``"float32[4,8]*"`` as a :class:`TensorMeta`; ValueError when it is not of that form."""
    m = _TENSOR.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"{text!r} is not DTYPE[D0,D1,...] with an optional '*'")
    shape = tuple(int(d) for d in m.group(2).split(",")) if m.group(2) else ()
    return TensorMeta(m.group(1), shape, m.group(3) == "*")


def message_problem(record: dict) -> Optional[str]:
    """What is wrong with a line's message fields, or None (absent fields are not wrong)."""
    p2p: Any = record.get("p2p")
    if p2p is not None:
        if not isinstance(p2p, list) or not all(isinstance(x, str) for x in p2p):
            return "has a 'p2p' field that is not a list of strings"
        for x in p2p:
            try:
                parse_tensor(x)
            except ValueError as exc:
                return f"has a 'p2p' element {exc}"
    reused: Any = record.get("reused")
    if "reused" in record and not (
        isinstance(reused, list)
        and len(reused) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in reused)
    ):
        return "has a 'reused' field that is not [iteration, step]"
    if "reused" in record and p2p is None:
        return "has 'reused' without the 'p2p' it describes"
    return None


__all__ = ["TensorMeta", "message_problem", "parse_tensor"]
