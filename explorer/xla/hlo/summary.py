"""One paragraph in words: what a person would say after reading the whole diff.

The seed issue's maintainers spent a thread finding "some additional computation" and "a bunch
of constant 9" in 35,000 lines; the summary says that in one sentence per kind of change, with
counts, opcodes, the aten op and the source line, biggest first.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from explorer.xla.hlo.records import HloDiff, InstructionGroup


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _most(counts: Counter, phrase: Callable[[Any, int], str], kind: str, sep: str) -> str:
    """The most common of ``counts``, each as ``phrase(key, n)``, and the rest counted, so the
    parts add up to the whole (four moved parameters once read "2 of f32[], 1 of f32[4]{0}")."""
    ranked = counts.most_common()
    shown = 3 if len(ranked) == 3 else 2  # a third alone is named, not counted as "1 other"
    text = sep.join(phrase(key, n) for key, n in ranked[:shown])
    rest = ranked[shown:]
    if rest:
        text += f"{sep}{sum(n for _, n in rest)} of {_plural(len(rest), 'other ' + kind)}"
    return text


def _group_phrase(g: InstructionGroup) -> str:
    ops = ", ".join(f"{n} {op}" for op, n in g.opcodes[:3])
    rest = g.opcodes[3:]
    if rest:  # said, not elided: "..." before the sentence's full stop read as "...."
        kinds = f"{len(rest)} other opcode{'s' if len(rest) > 1 else ''}"
        ops += f" and {sum(n for _, n in rest)} of {kinds}"
    origin = f" from `{g.op_type}`" if g.op_type else ""
    where = f" ({g.source})" if g.source else ""
    return f"{ops}{origin}{where}"


def _groups_sentence(verb: str, groups: list[InstructionGroup]) -> str:
    total = sum(g.count for g in groups)
    shown = "; ".join(_group_phrase(g) for g in groups[:3])
    more = f"; and {len(groups) - 3} more groups" if len(groups) > 3 else ""
    return f"{_plural(total, 'instruction')} {verb}: {shown}{more}."


def summarize(d: HloDiff) -> str:
    """The summary paragraph of a diff."""
    parts: list[str] = []
    structural = d.added or d.removed or d.changed or d.tuple_arity
    if not structural and d.parameters_a == d.parameters_b:
        head = "Same computation"
        head += f" ({_plural(d.matched_count, 'instruction')} matched one to one)"
        if not d.parameter_permutation:
            head += ", same parameter order"
        parts.append(head + ".")
    else:
        parts.append(
            f"{d.module_a}'s entry computation has {_plural(d.instructions_a, 'instruction')} "
            f"and {d.module_b}'s has {d.instructions_b}; {d.matched_count} matched."
        )
    if d.parameter_permutation:
        n = len(d.parameter_permutation)
        shapes = Counter(p.shape for p in d.parameter_permutation)
        shape_text = _most(shapes, lambda s, c: f"{c} of {s}", "shape", ", ")
        if d.parameter_order_kept:
            parts.append(
                f"{_plural(n, 'parameter')} of {d.parameters_a} shifted position, their order "
                f"kept ({shape_text}): parameters were added or removed before them."
            )
        else:
            parts.append(
                f"{_plural(n, 'parameter')} of {d.parameters_a} moved to another position ({shape_text}): "
                "torch_xla keys its compile cache on parameter order, so this alone recompiles."
            )
    if d.parameters_a != d.parameters_b:
        parts.append(f"The parameter count changed from {d.parameters_a} to {d.parameters_b}.")
    if d.moved_constants:
        lits = Counter((c.literal, c.op_type) for c in d.moved_constants)
        text = _most(
            lits,
            lambda key, n: f"{n} `constant({key[0]})`" + (f" from `{key[1]}`" if key[1] else ""),
            "constant",
            "; ",
        )
        parts.append(f"{_plural(len(d.moved_constants), 'constant')} moved ({text}).")
    if d.added:
        parts.append(_groups_sentence("added in " + d.module_b, d.added))
    if d.removed:
        parts.append(_groups_sentence("removed from " + d.module_a, d.removed))
    if d.changed:
        kinds = Counter(k for c in d.changed for k in c.kinds).most_common()
        text = ", ".join(f"{n} in {k}" for k, n in kinds)
        parts.append(f"{_plural(len(d.changed), 'matched instruction')} changed ({text}).")
    if d.tuple_arity:
        t = d.tuple_arity[0]
        parts.append(
            f"{_plural(len(d.tuple_arity), 'tuple')} changed arity (e.g. %{t.name_a} {t.opcode}: "
            f"{t.arity_a} -> {t.arity_b} elements)."
        )
    return " ".join(parts)


__all__ = ["summarize"]
