"""Say per step "new graph: yes/no, because ..." from the HLO diff against the closest earlier graph.

The seed's maintainers compared graphs by hand to find "different order of the parameters"
and "some additional computation"; here the closest earlier graph (most alike by the multiset
of (opcode, shape)) is diffed structurally and its records become one clause each: the
parameter count, moved parameters, added or removed ops with their ``op_type`` and source
line, changed shapes.
"""

from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence

from explorer.xla.hlo import HloDiff, Module
from explorer.xla.hlo.listing import similarity


def profile(module: Module, shapes: bool = True) -> Counter:
    """The multiset of (opcode, shape) over all computations: what "alike" is measured on.

    With ``shapes=False`` only opcodes count, so a graph whose input shape changed (every
    shape downstream changes too) is still recognised as the same program.
    """
    if shapes:
        return Counter(
            (i.opcode, i.shape) for c in module.computations.values() for i in c.instructions
        )
    return Counter(i.opcode for c in module.computations.values() for i in c.instructions)


def closest(target: Counter, earlier: Sequence[tuple[str, Counter]]) -> tuple[str, float]:
    """The earlier graph most alike ``target``, with its similarity (0..1); ``earlier`` holds one at least."""
    best, score = earlier[0][0], similarity(target, earlier[0][1])
    for key, prof in earlier[1:]:
        s = similarity(target, prof)
        if s > score:
            best, score = key, s
    return best, score


def short_source(source: str) -> str:
    """``.../site-packages/torch/optim/sgd.py:361`` -> ``torch/optim/sgd.py:361``."""
    for marker in ("site-packages/", "dist-packages/"):
        if marker in source:
            return source.split(marker, 1)[1]
    return source


def _group_clause(verb: str, groups: list) -> str:
    total = sum(g.count for g in groups)
    top = groups[0]
    where = f" at {short_source(top.source)}" if top.source else ""
    origin = f"`{top.op_type}`{where}" if top.op_type else "ops without metadata"
    more = f" and {len(groups) - 1} more group(s)" if len(groups) > 1 else ""
    return f"{total} instruction(s) {verb}, mostly {origin}{more}"


def reasons(d: HloDiff) -> list[str]:
    """One clause per kind of difference, most decisive first."""
    out = []
    if d.parameters_a != d.parameters_b:
        out.append(f"the parameter count changed from {d.parameters_a} to {d.parameters_b}")
    if d.parameter_permutation and d.parameter_order_kept:
        out.append(
            f"{len(d.parameter_permutation)} parameter(s) shifted position around the ones added "
            "or removed (their order kept)"
        )
    elif d.parameter_permutation:
        out.append(
            f"{len(d.parameter_permutation)} parameter(s) changed position (the compile cache keys on "
            "parameter order)"
        )
    if d.added:
        out.append(_group_clause("added", d.added))
    if d.removed:
        out.append(_group_clause("removed", d.removed))
    shapes = [c for c in d.changed if "shape" in c.kinds]
    arrays = [c for c in shapes if not c.before.startswith("(")]
    if arrays:
        c = arrays[0]
        origin = f" of `{c.op_type}`" if c.op_type else ""
        out.append(
            f"{len(shapes)} instruction(s) changed shape, first {c.before.split(' ', 2)[1].split('(')[0]}"
            f"{origin}: {c.before.split(' ', 1)[0]} -> {c.after.split(' ', 1)[0]}"
        )
    elif d.changed and not out:
        kinds = Counter(k for c in d.changed for k in c.kinds).most_common(2)
        out.append(
            f"{len(d.changed)} matched instruction(s) changed ({', '.join(k for k, _ in kinds)})"
        )
    if d.tuple_arity and not out:
        out.append(f"{len(d.tuple_arity)} tuple(s) changed arity")
    return out


def new_graph_sentence(
    graph_hash: str,
    against: Optional[str],
    against_step: Optional[int],
    score: float,
    diff: Optional[HloDiff],
    xla_cause: str,
    threshold: float = 0.8,
) -> str:
    """``new graph: yes, because ...`` for a graph first compiled in this step."""
    said = f"; torch_xla: {xla_cause}" if xla_cause else ""
    if against is None:
        return f"new graph: yes, because it is the first graph of the run ({graph_hash[:8]}){said}"
    where = "setup" if against_step is not None and against_step < 0 else f"step {against_step}"
    if diff is None:
        return (
            f"new graph: yes, because its hash {graph_hash[:8]} was not seen before (no HLO to compare with "
            f"{against[:8]} from {where}){said}"
        )
    if score < threshold:
        return (
            f"new graph: yes, because it is a new computation: the closest earlier graph, {against[:8]} "
            f"({where}), is only {score:.0%} alike{said}"
        )
    why = reasons(diff)
    if not why:
        why = [
            "the HLO matches it instruction for instruction, so the difference is outside the HLO "
            "(e.g. input sharding or device data)"
        ]
    alike = f"{score:.0%} alike"
    return (
        f"new graph: yes, because against graph {against[:8]} ({where}, {alike}) "
        + "; ".join(why)
        + said
    )


def cached_sentence(
    graph_hash: Optional[str], compiled_at: Optional[int], evicted: bool = False
) -> str:
    """``new graph: no, because ...`` for a step that ran graphs seen before."""
    if graph_hash is None:
        return "new graph: no, because nothing was pending at the sync (no graph ran)"
    where = "setup" if compiled_at is not None and compiled_at < 0 else f"step {compiled_at}"
    if evicted:
        return (
            f"new graph: no, because graph {graph_hash[:8]} (first compiled at {where}) was compiled again "
            "after leaving the compile cache"
        )
    return f"new graph: no, because graph {graph_hash[:8]} (compiled at {where}) ran from the compile cache"


__all__ = ["profile", "closest", "short_source", "reasons", "new_graph_sentence", "cached_sentence"]
