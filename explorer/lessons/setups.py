"""A schedule set-up as a lesson names it, and its report from the pipeline product's own check.

A set-up is one line: a schedule kind and options, the same words as ``explorer check``::

    deepspeed-train buffers=fixed order=legacy
    1f1b model=blocking
    deepspeed-train buffers=legacy rules=defer-recv,grads-first

optionally after a label and `` = `` with spaces (``The fix (#2862) = deepspeed-train order=fixed``). Every
verdict a lesson shows comes from :func:`report`, that is from ``explorer.pipeline.check`` on
``explorer.pipeline.build`` (plus the named rewrite rules), so a lesson cannot say anything the
command would not.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Optional, Union

from explorer.errors import InputError
from explorer.lessons.source import LessonError

if TYPE_CHECKING:
    from explorer.pipeline import Report
    from explorer.pipeline.schedules import Schedule

_OPTIONS = ("buffers", "order", "chunks", "rules", "model")


@dataclass(frozen=True)
class Setup:
    """A schedule kind with its options; ``label`` is what the page calls it."""

    label: str
    kind: str
    buffers: Union[None, str, int] = None
    order: Optional[str] = None
    chunks: int = 1
    rules: tuple[str, ...] = ()
    model: Optional[str] = None

    @property
    def spec(self) -> str:
        """The set-up as one line of ``key=value`` words (what the page prints under the label)."""
        words = [self.kind]
        if self.buffers is not None:
            words.append(f"buffers={self.buffers}")
        if self.order:
            words.append(f"order={self.order}")
        if self.chunks != 1:
            words.append(f"chunks={self.chunks}")
        if self.rules:
            words.append(f"rules={','.join(self.rules)}")
        if self.model:
            words.append(f"model={self.model}")
        return " ".join(words)


def parse_setup(text: str, where: str) -> Setup:
    """``[label =] kind key=value ...``; a bad word is the teacher's to fix (``where`` says where)."""
    label, sep, spec = text.partition(" = ")
    if not sep:
        label, spec = "", text
    words = spec.split()
    if not words:
        raise LessonError(f"{where}: a set-up names a schedule kind, e.g. 'deepspeed-train'")
    values: dict[str, str] = {}
    for word in words[1:]:
        key, eq, value = word.partition("=")
        if not eq or key not in _OPTIONS:
            raise LessonError(
                f"{where}: set-up option {word!r} is not one of {', '.join(o + '=' for o in _OPTIONS)}"
            )
        values[key] = value
    buffers: Union[None, str, int] = values.get("buffers")
    if isinstance(buffers, str) and buffers.isdigit():
        buffers = int(buffers)
    chunks = values.get("chunks", "1")
    if not chunks.isdigit():
        raise LessonError(f"{where}: chunks={chunks} must be a whole number")
    _known(words[0], values, where)
    setup = Setup(
        label="",
        kind=words[0],
        buffers=buffers,
        order=values.get("order"),
        chunks=int(chunks),
        rules=tuple(r for r in values.get("rules", "").split(",") if r),
        model=values.get("model"),
    )
    return replace(setup, label=label.strip() or setup.spec)


#: The words each option takes, as ``explorer check`` takes them (a number is also a buffer count).
_CHOICES = {
    "order": ("legacy", "fixed"),
    "model": ("blocking", "batched"),
    "buffers": ("legacy", "fixed", "minimal"),
}


def _known(kind: str, values: dict[str, str], where: str) -> None:
    """Refuse a kind, option value or rule ``explorer check`` would refuse: such a set-up fails
    at every size, and a question that skips failed sizes called it clean."""
    from explorer.pipeline import KINDS, RULES

    if kind not in KINDS:
        raise LessonError(
            f"{where}: unknown schedule kind {kind!r}: choose among {', '.join(KINDS)}"
        )
    for key, allowed in _CHOICES.items():
        value = values.get(key)
        if (
            value is not None
            and value not in allowed
            and not (key == "buffers" and value.isdigit())
        ):
            extra = " or a number" if key == "buffers" else ""
            raise LessonError(f"{where}: {key}={value} is not one of {', '.join(allowed)}{extra}")
    unknown = [r for r in values.get("rules", "").split(",") if r and r not in RULES]
    if unknown:
        raise LessonError(f"{where}: unknown rule {unknown[0]!r}: choose among {', '.join(RULES)}")


def schedule_of(setup: Setup, stages: int, microbatches: int) -> "Schedule":
    """``build(...)`` with the set-up's rules applied; a size the kind refuses raises InputError."""
    from explorer.pipeline import RULES, apply_rules, build

    unknown = [r for r in setup.rules if r not in RULES]
    if unknown:
        raise InputError(f"unknown rule {unknown[0]!r}: choose among {', '.join(RULES)}")
    schedule = build(
        setup.kind,  # type: ignore[arg-type]  # the generator validates the kind itself
        stages,
        microbatches,
        chunks=setup.chunks,
        buffers=setup.buffers,
        order=setup.order,  # type: ignore[arg-type]
    )
    return apply_rules(schedule, [RULES[r] for r in setup.rules])


def report(setup: Setup, stages: int, microbatches: int) -> "Report":
    """``check`` on :func:`schedule_of`, under the set-up's P2P model (the schedule's own if none)."""
    from explorer.pipeline import check

    return check(schedule_of(setup, stages, microbatches), model=setup.model)  # type: ignore[arg-type]


def parse_size(text: str, where: str) -> tuple[int, int]:
    """``4x8`` (stages x micro-batches)."""
    a, sep, b = text.replace("×", "x").replace(" ", "").partition("x")
    if not sep or not a.isdigit() or not b.isdigit():
        raise LessonError(f"{where}: a size is STAGESxMICROBATCHES, e.g. 4x8; got {text!r}")
    return int(a), int(b)


def parse_range(text: str, where: str, what: str) -> list[int]:
    """``2-8`` or ``1,2,4``: the values an explore block offers for ``what``."""
    values: list[int] = []
    for part in text.replace(" ", "").split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise LessonError(
                f"{where}: {what} is a range like 2-8 or a list like 2,4,8; got {text!r}"
            )
        first, last = int(lo), int(hi) if dash else int(lo)
        if last - first + 1 > 64 or len(values) > 64:  # before the list is made: 2-999999999999
            raise LessonError(f"{where}: {what} must hold 1 to 64 positive values; got {text!r}")
        values.extend(range(first, last + 1))
    if not values or min(values) < 1 or len(values) > 64:
        raise LessonError(f"{where}: {what} must hold 1 to 64 positive values; got {text!r}")
    return sorted(set(values))


__all__ = ["Setup", "parse_range", "parse_setup", "parse_size", "report", "schedule_of"]
