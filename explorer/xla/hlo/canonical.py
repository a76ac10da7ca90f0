"""Canonical text of a module: the same for every renumbering and every instruction order.

Two dumps of the same program differ textually in the ``.N`` suffixes (a global counter in
torch_xla) and in the order instructions are listed. The canonical form renames computations
``%comp.K`` and instructions ``%opcode.K`` by their position in a structural order: a
post-order walk from the root (operands in operand order), then unreachable instructions
sorted by fingerprint. Entry parameters keep their number (``%param.N``) because the order of
parameters is part of the program's identity for torch_xla's compile cache. Metadata is left
out. The benchmark runs ``difflib`` on this text as the baseline the structural diff must beat.
"""

from __future__ import annotations

from explorer.xla.hlo.fingerprint import computation_hashes, computation_prints, structural_attrs
from explorer.xla.hlo.model import Computation, HloInstruction, Module


def canonical_order(comp: Computation, subgraph_print: dict[str, str]) -> list[HloInstruction]:
    """Post-order from the root, then each unreachable instruction's own post-order."""
    by_name = comp.by_name
    seen: set[str] = set()
    out: list[HloInstruction] = []

    def walk(start: HloInstruction) -> None:
        stack = [(start, 0)]
        seen.add(start.name)
        while stack:
            inst, k = stack.pop()
            if k < len(inst.operands):
                stack.append((inst, k + 1))
                op = inst.operands[k]
                if op not in seen:
                    seen.add(op)
                    stack.append((by_name[op], 0))
            else:
                out.append(inst)

    assert comp.root is not None
    walk(comp.root)
    rest = [i for i in comp.instructions if i.name not in seen]
    rest.sort(key=lambda i: (subgraph_print[i.name], i.opcode))
    for inst in rest:
        if inst.name not in seen:
            walk(inst)
    return out


def canonical_text(module: Module) -> str:
    """The module printed with structural names and order, without metadata."""
    hashes = computation_hashes(module)
    comp_order = sorted(
        (c for c in module.computations.values() if not c.is_entry and c is not module.entry),
        key=lambda c: (hashes[c.name], c.name),
    )
    comp_order.append(module.entry)
    comp_names = {c.name: f"comp.{k}" for k, c in enumerate(comp_order)}
    lines = ["HloModule canonical"]
    for comp in comp_order:
        is_entry = comp is module.entry
        prints = computation_prints(comp, hashes, with_numbers=not is_entry)
        order = canonical_order(comp, prints.subgraph_print)
        names: dict[str, str] = {}
        counts: dict[str, int] = {}
        for inst in order:
            if inst.parameter_number is not None:
                names[inst.name] = f"param.{inst.parameter_number}"
            else:
                k = counts.get(inst.opcode, 0)
                counts[inst.opcode] = k + 1
                names[inst.name] = f"{inst.opcode}.{k}"
        lines.append("")
        lines.append(f"{'ENTRY ' if is_entry else ''}%{comp_names[comp.name]} {{")
        for inst in order:
            lines.append(_line(inst, names, comp_names, inst is comp.root))
        lines.append("}")
    return "\n".join(lines) + "\n"


def _line(
    inst: HloInstruction, names: dict[str, str], comp_names: dict[str, str], is_root: bool
) -> str:
    if inst.opcode in ("constant", "parameter"):
        args = inst.literal
    else:
        args = ", ".join("%" + names[o] for o in inst.operands)
    attrs = [", " + a for a in structural_attrs(inst, comp_names, "%")]
    root = "ROOT " if is_root else ""
    return f"  {root}%{names[inst.name]} = {inst.shape} {inst.opcode}({args}){''.join(attrs)}"


__all__ = ["canonical_order", "canonical_text"]
