"""Split HLO text into modules and build checked :class:`Module` records.

Three inputs look alike but are not: one module (``_get_xla_tensors_hlo``, an
``--xla_dump_to`` file), and torch_xla's ``XLA_SAVE_TENSORS_FILE``, where modules sit between
Python stack frames, ``Graph Hash:`` lines and ``## BEGIN_GRAPH`` markers. Text outside a module
is skipped; text inside one must be HLO, so a truncated or corrupted module is an error at the
first bad line rather than a silently shorter graph.
"""

from __future__ import annotations

import os
import re
from typing import Iterator, Optional

from explorer import inputs
from explorer.errors import InputError
from explorer.gcpause import paused_gc
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.lines import (
    parse_common_instruction,
    parse_computation_header,
    parse_hlo_line,
)
from explorer.xla.hlo.model import NO_METADATA, Computation, HloInstruction, Module

_MODULE = re.compile(r"HloModule\s+%?([A-Za-z_][\w.\-]*)\s*(?:,\s*(.*))?$")
_GRAPH_HASH = re.compile(r"Graph Hash:\s*(\S+)")
_INSIDE = re.compile(r"\s|%|ENTRY\b|ROOT\b|\}")
#: A line only a module holds (a computation's header, an instruction, a closing brace), met
#: where no module is open. Text between modules is skipped on purpose (a torch_xla save file
#: frames each module with its own lines, indented stack frames among them), but a module whose
#: header line was garbled read as that skipped text: it vanished, and ``hlo-diff`` of the file
#: said "Same" of two modules that differ.
_ORPHAN = re.compile(r"(?:%[\w.\-]+|ENTRY\b|ROOT\b|\})")


def _implicit_params(comp: Computation, params: list[tuple[str, str]]) -> None:
    """torch_xla prints called computations' parameters only in the header: add them."""
    for number, (name, shape) in enumerate(params):
        if name not in comp.by_name:
            inst = HloInstruction(
                name=name,
                shape=shape,
                opcode="parameter",
                operands=(),
                attrs=(),
                literal=str(number),
                metadata=NO_METADATA,
                line=comp.line,
                parameter_number=number,
            )
            comp.instructions.insert(number, inst)
            comp.by_name[name] = inst


def _check_computation(comp: Computation, source: str) -> None:
    """Operands exist, parameter numbers are unique, no cycles; set root and ``order``.

    XLA prints operands before their users, so one pass that only checks "every operand was
    already defined" settles existence, acyclicity and the order at once; text in another
    order takes the general checks and Kahn's algorithm.
    """
    numbers: dict[int, HloInstruction] = {}
    insts = comp.instructions
    for inst in [i for i in insts if i.parameter_number is not None]:
        number = inst.parameter_number
        assert number is not None  # the comprehension kept only these
        if number in numbers:
            raise HloParseError(
                f"parameter number {number} used twice in %{comp.name}",
                inst.line,
                1,
                inst.name,
                source,
            )
        numbers[number] = inst
    if numbers and len(numbers) != max(numbers) + 1:  # XLA numbers them 0 to n-1, no gaps
        gap = next(n for n in range(len(numbers) + 1) if n not in numbers)
        last = numbers[max(numbers)]
        raise HloParseError(
            f"parameter numbers of %{comp.name} skip {gap} (it has parameter({max(numbers)}) and "
            f"{len(numbers)} parameters): XLA numbers a computation's parameters 0 to n-1; was "
            "the module edited?",
            last.line,
            1,
            last.name,
            source,
        )
    roots = [i for i in insts if i.is_root]
    seen: set[str] = set()
    defined, add = seen.issuperset, seen.add
    in_file_order = True
    for inst in insts:
        if inst.operands and not defined(inst.operands):
            in_file_order = False
            break
        add(inst.name)
    if not in_file_order:
        for inst in comp.instructions:
            for op in inst.operands:
                if op not in comp.by_name:
                    raise HloParseError(
                        f"operand %{op} is not defined in computation %{comp.name}",
                        inst.line,
                        1,
                        inst.name,
                        source,
                    )
    if len(roots) > 1:
        raise HloParseError(
            f"computation %{comp.name} has {len(roots)} ROOT instructions",
            roots[1].line,
            1,
            roots[1].name,
            source,
        )
    if not comp.instructions:
        raise HloParseError(
            f"computation %{comp.name} has no instructions", comp.line, 1, comp.name, source
        )
    comp.root = roots[0] if roots else comp.instructions[-1]
    comp.order = list(comp.instructions) if in_file_order else _topological(comp, source)


def _topological(comp: Computation, source: str) -> list[HloInstruction]:
    """Operands before users, keeping file order where the graph allows (Kahn's algorithm)."""
    by_name = comp.by_name
    pending = {i.name: len(set(i.operands)) for i in comp.instructions}
    users: dict[str, list[HloInstruction]] = {}
    for inst in comp.instructions:
        for op in set(inst.operands):
            users.setdefault(op, []).append(inst)
    ready = [i for i in reversed(comp.instructions) if pending[i.name] == 0]
    order: list[HloInstruction] = []
    while ready:
        inst = ready.pop()
        order.append(inst)
        for user in reversed(users.get(inst.name, ())):
            pending[user.name] -= 1
            if pending[user.name] == 0:
                ready.append(user)
    if len(order) != len(comp.instructions):
        stuck = next(i for i in comp.instructions if pending[i.name] > 0)
        raise HloParseError(
            f"instructions in %{comp.name} depend on each other in a cycle",
            stuck.line,
            1,
            by_name[stuck.name].name,
            source,
        )
    return order


def _check_module(module: Module, source: str) -> None:
    """Called computations exist and do not call back into themselves."""
    for comp in module.computations.values():
        _check_computation(comp, source)
    state: dict[str, int] = {}
    for start in module.computations:
        stack = [(start, iter(_callees(module, module.computations[start], source)))]
        state[start] = state.get(start, 0) or 1
        if state[start] == 2:
            continue
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                comp = module.computations[name]
                raise HloParseError(
                    f"computation %{nxt} calls itself through %{name}", comp.line, 1, name, source
                )
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(_callees(module, module.computations[nxt], source))))


def _callees(module: Module, comp: Computation, source: str) -> list[str]:
    out = []
    for inst in comp.instructions:
        for callee in inst.called:
            if callee not in module.computations:
                raise HloParseError(
                    f"%{inst.name} calls computation %{callee}, which is not in module {module.name}",
                    inst.line,
                    1,
                    inst.name,
                    source,
                )
            out.append(callee)
    return out


def iter_modules(text: str, source: str = "") -> Iterator[Module]:
    """Every module in ``text``, checked; raise :class:`HloParseError` at the first bad line."""
    lines = text.split("\n")
    found = False
    i, n = 0, len(lines)
    last: Optional[Module] = None
    while i < n:
        line = lines[i]
        if line.startswith("HloModule"):
            module, i = _read_module(lines, i, source)
            found = True
            last = module
            yield module
            continue
        if _ORPHAN.match(line):
            raise HloParseError(
                "HLO text outside any module: the 'HloModule' line before it is missing or "
                "garbled; give whole modules, each opened by 'HloModule name, ...'",
                i + 1,
                1,
                line,
                source,
            )
        if last is not None and not last.graph_hash:
            m = _GRAPH_HASH.match(line)
            if m:
                last.graph_hash = m.group(1)
        i += 1
    if not found:
        first = next((k for k, line in enumerate(lines) if line.strip()), 0)
        raise HloParseError(
            "no 'HloModule' line found: is this HLO text?",
            first + 1,
            1,
            lines[first] if lines else "",
            source,
        )


def _read_module(lines: list[str], i: int, source: str) -> tuple[Module, int]:
    head = lines[i].rstrip()
    m = _MODULE.match(head)
    if not m:
        raise HloParseError(
            "malformed module header, expected 'HloModule name, ...'", i + 1, 1, head, source
        )
    first = i
    comps: dict[str, Computation] = {}
    i += 1
    n = len(lines)
    while i < n:
        line = lines[i]
        stripped = line.strip()
        if not stripped or stripped.startswith("//"):
            i += 1
            continue
        if line.startswith("HloModule"):
            break
        try:
            header = parse_computation_header(line, i + 1)
        except HloParseError as exc:
            raise exc.with_source(source) from None
        if header is None:
            if _INSIDE.match(line) or not comps:
                raise HloParseError(
                    "expected a computation header '[ENTRY] %name (...) -> shape {'",
                    i + 1,
                    1,
                    line,
                    source,
                )
            break
        i = _read_computation(lines, i, header, comps, source)
    if not comps:
        raise HloParseError(
            f"module {m.group(1)} has no computations (file truncated?)", first + 1, 1, head, source
        )
    entries = [c for c in comps.values() if c.is_entry]
    if len(entries) > 1:
        raise HloParseError(
            f"module {m.group(1)} has {len(entries)} ENTRY computations",
            entries[1].line,
            1,
            entries[1].name,
            source,
        )
    if not entries:  # XLA prints one ENTRY per module: a text cut before it ends in a callee
        last_comp = list(comps.values())[-1]
        raise HloParseError(
            f"module {m.group(1)} has no ENTRY computation (file truncated before it?); "
            "give the whole module",
            last_comp.line,
            1,
            last_comp.name,
            source,
        )
    entry = entries[0]
    last = i
    while last > first and not lines[last - 1].strip():
        last -= 1
    module = Module(
        name=m.group(1),
        header=m.group(2) or "",
        computations=comps,
        entry=entry,
        first_line=first + 1,
        last_line=last,
        text="\n".join(lines[first:last]) + "\n",
    )
    _check_module(module, source)
    return module, i


def _read_computation(lines: list[str], i: int, header: tuple, comps: dict, source: str) -> int:
    name, is_entry, params = header
    if name in comps:
        raise HloParseError(f"computation %{name} is defined twice", i + 1, 1, lines[i], source)
    comp = Computation(name=name, is_entry=is_entry, line=i + 1)
    opened = i
    i += 1
    n = len(lines)
    by_name = comp.by_name
    append = comp.instructions.append
    while i < n:
        line = lines[i]
        inst = parse_common_instruction(line, i + 1)
        if inst is not None:
            if inst.name in by_name:
                raise HloParseError(
                    f"instruction %{inst.name} is defined twice", i + 1, 1, line, source
                )
            by_name[inst.name] = inst
            append(inst)
            i += 1
            continue
        stripped = line.strip()
        if stripped.startswith("}"):
            if stripped != "}" and not stripped[1:].lstrip().startswith(","):
                raise HloParseError("unexpected text after '}'", i + 1, 1, line, source)
            _implicit_params(comp, params)
            comps[name] = comp
            return i + 1
        if line.startswith("HloModule"):
            break
        if stripped:
            try:
                inst = parse_hlo_line(line, i + 1)
            except HloParseError as exc:
                raise exc.with_source(source) from None
            if inst.name in by_name:
                raise HloParseError(
                    f"instruction %{inst.name} is defined twice", i + 1, 1, line, source
                )
            by_name[inst.name] = inst
            append(inst)
        i += 1
    raise HloParseError(
        f"computation %{name} is not closed by '}}' (file truncated?)",
        opened + 1,
        1,
        lines[opened],
        source,
    )


def parse_modules(text: str, source: str = "") -> list[Module]:
    """All modules in ``text`` (one module, a dump file, or a torch_xla save file)."""
    with paused_gc():
        return list(iter_modules(text, source))


def parse_module(text: str, source: str = "") -> Module:
    """Exactly one module; several is an error that says to pick one."""
    modules = parse_modules(text, source)
    if len(modules) != 1:
        raise InputError(
            f"{source or 'the text'} holds {len(modules)} modules, expected 1: pick one by name or index"
        )
    return modules[0]


def read_text(path: str) -> str:
    """A file's text; ``.gz`` files are decompressed. Unreadable files are an InputError.

    Only regular files within :data:`explorer.inputs.MAX_TEXT_BYTES` (also after
    decompression) are read: a FIFO would block, ``/dev/zero`` would never end, and a corrupt
    gzip stream or Latin-1 bytes are named rather than raised as decoder errors. A leading
    byte-order mark (an editor that saved the text "with BOM") is dropped: it made the
    ``HloModule`` line unreadable, and the refusal said the file held none.
    """
    text = inputs.read_text(path, "")
    return text[1:] if text.startswith("\ufeff") else text


def read_modules(path: str) -> list[Module]:
    """Parse every module in a file."""
    return parse_modules(read_text(path), os.path.basename(path))


__all__ = ["iter_modules", "parse_modules", "parse_module", "read_text", "read_modules"]
