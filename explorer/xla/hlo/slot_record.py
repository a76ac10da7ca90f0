"""Record classes with a dataclass's equality and repr, made without :mod:`dataclasses`.

``explorer hlo-diff`` is run in loops and scripts, and all of it takes about 0.2 s on a pair of
35,000-instruction modules. Importing :mod:`dataclasses` (which imports :mod:`inspect`) and
generating the methods of the HLO reader's records took about 15 ms of that in every process:
the code generation runs each time a class statement does. The mutable records here write their
``__init__`` by hand and take ``__eq__`` and ``__repr__`` from the field names in their
``__slots__``; the immutable ones are ``NamedTuple`` classes.
"""

from __future__ import annotations


class SlotRecord:
    """Equal when of one class with equal fields (the names in ``__slots__``, in order), shown
    as ``Name(field=value, ...)``, unhashable because mutable: a ``@dataclass`` without
    ``frozen``, for classes that define ``__slots__`` and ``__init__``."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable: as a dataclass with eq and no frozen
    #: Fields left out of the repr (``field(repr=False)``): a diff's 35,000 matched pairs.
    _not_shown: frozenset[str] = frozenset()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, SlotRecord)
        return self._values() == other._values()

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in self.__slots__
            if name not in self._not_shown
        )
        return f"{type(self).__qualname__}({shown})"


__all__ = ["SlotRecord"]
