"""Large synthetic modules with planted differences, for the HLO property tests (test support).

Real modules tell whether the parser copes with what torch_xla prints; they cannot tell
whether the diff finds *exactly* what changed, because nobody knows the true answer for a
35,000-line pair. Here the answer is known: module B is module A with a permutation of
parameters, constants moved elsewhere in the text, and a chain of inserted instructions that
feeds one extra output, and B is then renumbered (and, if asked, listed in another valid order).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

_SIZES = (8, 16, 32, 64, 128)
_BINARY = ("add", "multiply", "subtract", "maximum")
_UNARY = ("tanh", "exponential", "negate")
_ADD_COMP = (
    "%AddComputation.1 (x.2: f32[], y.3: f32[]) -> f32[] {\n"
    "  %x.2 = f32[] parameter(0)\n  %y.3 = f32[] parameter(1)\n"
    "  ROOT %add.4 = f32[] add(f32[] %x.2, f32[] %y.3)\n}\n"
)


@dataclass
class _Node:
    opcode: str
    shape: str
    operands: list[int]
    literal: str = ""
    attrs: str = ""
    op_type: str = ""
    line: int = 0


@dataclass
class Planted:
    """What B differs from A by: the answer the diff must find."""

    permutation: dict[int, int] = field(default_factory=dict)  # parameter number in A -> in B
    moved_constants: list[str] = field(default_factory=list)  # literals
    inserted: int = 0
    inserted_op_type: str = "planted__extra"
    outputs_a: int = 0


def _shape(n: int) -> str:
    return f"f32[{n}]{{0}}"


def _build(rng: random.Random, target: int, params: int) -> tuple[list[_Node], list[int]]:
    nodes: list[_Node] = []
    by_shape: dict[str, list[int]] = {}

    def add(node: _Node) -> int:
        nodes.append(node)
        by_shape.setdefault(node.shape, []).append(len(nodes) - 1)
        return len(nodes) - 1

    for k in range(params):
        size = 64 if k == 0 else rng.choice(_SIZES)  # the inserted chain needs one f32[64] input
        p = add(_Node("parameter", _shape(size), [], str(k), op_type="xla__device_data"))
        add(_Node(rng.choice(_UNARY), nodes[p].shape, [p], op_type="aten__act", line=10 + k % 50))
    zero = add(_Node("constant", "f32[]", [], "0", op_type="prim__Constant"))
    while len(nodes) < target:
        shape = _shape(rng.choice(_SIZES))
        pool = by_shape.get(shape)
        if not pool:
            continue
        recent = pool[-40:]
        r = rng.random()
        line = rng.randint(1, 400)
        if r < 0.45:
            add(
                _Node(
                    rng.choice(_BINARY),
                    shape,
                    [rng.choice(recent), rng.choice(recent)],
                    op_type="aten__binary",
                    line=line,
                )
            )
        elif r < 0.7:
            add(
                _Node(
                    rng.choice(_UNARY),
                    shape,
                    [rng.choice(recent)],
                    op_type="aten__unary",
                    line=line,
                )
            )
        elif r < 0.85:
            c = add(
                _Node(
                    "constant",
                    "f32[]",
                    [],
                    f"{rng.randint(2, 50) / 4}",
                    op_type="prim__Constant",
                    line=line,
                )
            )
            b = add(
                _Node(
                    "broadcast",
                    shape,
                    [c],
                    attrs=", dimensions={}",
                    op_type="aten__expand",
                    line=line,
                )
            )
            add(_Node("multiply", shape, [rng.choice(recent), b], op_type="aten__mul", line=line))
        else:
            src_shape = _shape(rng.choice(_SIZES))
            if src_shape not in by_shape:
                continue
            s = add(
                _Node(
                    "reduce",
                    "f32[]",
                    [rng.choice(by_shape[src_shape][-40:]), zero],
                    attrs=", dimensions={0}, to_apply=%AddComputation.1",
                    op_type="aten__sum",
                    line=line,
                )
            )
            b = add(
                _Node(
                    "broadcast",
                    shape,
                    [s],
                    attrs=", dimensions={}",
                    op_type="aten__expand",
                    line=line,
                )
            )
            add(_Node("add", shape, [rng.choice(recent), b], op_type="aten__add", line=line))
    used = {o for n in nodes for o in n.operands}
    outputs = [k for k, n in enumerate(nodes) if k not in used and n.shape != "f32[]"]
    return nodes, outputs


def _print(
    nodes: list[_Node], outputs: list[int], order: list[int], ids: list[int], name: str
) -> str:
    names = [f"{n.opcode}.{ids[k]}" for k, n in enumerate(nodes)]
    params = sorted((int(n.literal), k) for k, n in enumerate(nodes) if n.opcode == "parameter")
    sig = ", ".join(f"{names[k]}: {nodes[k].shape.split('{')[0]}" for _, k in params)
    out_shape = "(" + ", ".join(nodes[k].shape for k in outputs) + ")"
    lines = [
        f"HloModule {name}, entry_computation_layout={{()->()}}",
        "",
        _ADD_COMP,
        f"ENTRY %{name} ({sig}) -> {out_shape} {{",
    ]
    for k in order:
        n = nodes[k]
        if n.opcode in ("parameter", "constant"):
            inner = n.literal
        else:
            inner = ", ".join(f"{nodes[o].shape} %{names[o]}" for o in n.operands)
        meta = f'op_type="{n.op_type}" op_name="{n.op_type}"'
        if n.line:
            meta += f' source_file="model.py" source_line={n.line}'
        lines.append(f"  %{names[k]} = {n.shape} {n.opcode}({inner}){n.attrs}, metadata={{{meta}}}")
    root = ", ".join(f"{nodes[o].shape} %{names[o]}" for o in outputs)
    lines.append(f"  ROOT %tuple.{len(nodes) + 10**7} = {out_shape} tuple({root})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _shuffled_topological(rng: random.Random, nodes: list[_Node]) -> list[int]:
    users: list[list[int]] = [[] for _ in nodes]
    pending = [len(set(n.operands)) for n in nodes]
    for k, n in enumerate(nodes):
        for o in set(n.operands):
            users[o].append(k)
    ready = [k for k, p in enumerate(pending) if p == 0]
    order = []
    while ready:
        j = rng.randrange(len(ready))
        ready[j], ready[-1] = ready[-1], ready[j]
        k = ready.pop()
        order.append(k)
        for u in users[k]:
            pending[u] -= 1
            if pending[u] == 0:
                ready.append(u)
    return order


def planted_pair(
    seed: int,
    instructions: int = 35_000,
    permuted: int = 26,
    moved: int = 12,
    inserted: int = 3,
    shuffle: bool = False,
) -> tuple[str, str, Planted]:
    """Texts of modules A and B (about ``instructions`` each) and what was planted in B.

    B is renumbered; with ``shuffle`` it is also listed in another topological order (then
    every instruction "moved", so moved constants are only meaningful without it).
    """
    rng = random.Random(seed)
    params = max(permuted, 4, instructions // 200)
    nodes, outputs = _build(rng, instructions, params)
    planted = Planted(outputs_a=len(outputs))
    dead = []
    for k in range(moved):
        lit = f"{1000 + k}.5"
        nodes.append(
            _Node("constant", "s32[]" if k % 2 else "f32[]", [], lit, op_type="aten__sum", line=7)
        )
        dead.append(len(nodes) - 1)
        planted.moved_constants.append(lit)
    order_a = list(range(len(nodes) - moved))
    for d in dead:
        order_a.insert(rng.randrange(len(order_a) // 2), d)
    text_a = _print(nodes, outputs, order_a, list(range(len(nodes))), f"IrToHlo.{seed}")

    chosen = rng.sample([k for k, n in enumerate(nodes) if n.opcode == "parameter"], permuted)
    numbers = [int(nodes[k].literal) for k in chosen]
    shuffled = numbers[:]
    while permuted > 1 and shuffled == numbers:
        rng.shuffle(shuffled)
    for k, old, new in zip(chosen, numbers, shuffled):
        nodes[k].literal = str(new)
        if old != new:
            planted.permutation[old] = new
    prev = rng.choice([k for k, n in enumerate(nodes) if n.shape == _shape(64)])
    for _ in range(inserted):
        other = rng.choice([k for k, n in enumerate(nodes) if n.shape == _shape(64)])
        nodes.append(
            _Node(
                rng.choice(_BINARY),
                _shape(64),
                [prev, other],
                op_type=planted.inserted_op_type,
                line=999,
            )
        )
        prev = len(nodes) - 1
    planted.inserted = inserted
    outputs_b = outputs + ([prev] if inserted else [])
    base = _shuffled_topological(rng, nodes[: len(nodes) - inserted]) if shuffle else order_a
    dead_set = set(dead)
    order_b = [k for k in base if k not in dead_set]
    for d in dead:
        order_b.insert(len(order_b) // 2 + rng.randrange(len(order_b) // 2), d)
    order_b += list(range(len(nodes) - inserted, len(nodes)))
    ids = rng.sample(range(20, 20 + 4 * len(nodes)), len(nodes))
    text_b = _print(nodes, outputs_b, order_b, ids, f"IrToHlo.{seed + 1}")
    return text_a, text_b, planted
