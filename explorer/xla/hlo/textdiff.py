"""``hlo-diff`` of two one-module texts without a record per entry instruction.

The entry computation holds nearly every instruction of a torch_xla module, and a diff needs
its graph, not its records: its body is cut out of the text and read by
:func:`explorer.xla.hlo.flat_graph.flat_graph`, while the rest (the module header and the small
called computations, whose fingerprints the entry's calls need) is read by the careful reader.
Any text this path is not sure of (several modules, no single ``ENTRY`` line at the start of a
line, a body that is not one instruction per line up to a lone ``}``, or anything
:func:`flat_graph` hands back) returns None, and the caller diffs the modules the careful reader
makes, so answers and error messages do not depend on which path ran.
"""

from __future__ import annotations

from types import ModuleType
from typing import NamedTuple, Optional

from explorer.errors import InputError
from explorer.gcpause import paused_gc
from explorer.xla.hlo import kernels
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.fingerprint import Interner, attr_text, computation_hashes
from explorer.xla.hlo.flat_graph import flat_graph
from explorer.xla.hlo.graph import Graph
from explorer.xla.hlo.lines import rest_tail
from explorer.xla.hlo.reader import _MODULE, parse_modules
from explorer.xla.hlo.records import HloDiff


class EntryCut(NamedTuple):
    """A module text with its entry body cut out, and that body."""

    rest: str  # the text without the body's lines (the lines after it move up)
    body: str  # the body's lines, without the last newline
    first_line: int  # the 1-based line number of the body's first line in the text


def cut_entry(text: str) -> Optional[EntryCut]:
    """Split off the one entry computation's body, or None when the text is not that simple.

    The text must hold one ``HloModule`` line and one ``ENTRY`` line, both outside the body: a
    body line that starts so is no instruction, and the line readers hand the whole text to the
    careful reader, which says what it is. (Counting them in the text around the body, not in
    all of it, spares two passes over the body's megabytes.)
    """
    at = text.find("\nENTRY")
    if at < 0:
        return None
    header_end = text.find("\n", at + 1)
    if header_end < 0 or not text[at + 1 : header_end].rstrip().endswith("{"):
        return None
    start = header_end + 1
    close = text.find("\n}", start)
    if close <= start:
        return None
    line_end = text.find("\n", close + 1)
    if text[close + 1 : line_end if line_end >= 0 else len(text)].strip() != "}":
        return None
    rest = text[:start] + text[close + 1 :]
    if rest.count("\nHloModule") + rest.startswith("HloModule") != 1:
        return None
    if rest.count("\nENTRY") != 1:
        return None
    return EntryCut(rest, text[start:close], text.count("\n", 0, start) + 1)


def text_graph(
    text: str, source: str, interner: Interner, rest_in_c: bool = False
) -> Optional[Graph]:
    """The entry graph of a one-module text read by :func:`flat_graph`, or None.

    ``rest_in_c`` (with ``interner.keys``) reads the text around the entry body in C too, and
    hands back None where that cannot: the called computations' fingerprints are then ids of
    the key table, which the careful reader's of the other graph would not equal.
    """
    cut = cut_entry(text)
    if cut is None:
        return None
    compiled = kernels.compiled()
    if rest_in_c and interner.keys is not None and compiled is not None:
        rest = _compiled_rest(compiled, cut.rest, interner.keys)
        if rest is None:
            return None
        name, hashes, header_params = rest
        return flat_graph(
            cut.body, cut.first_line, name, hashes, set(hashes), header_params, interner
        )
    try:
        modules = parse_modules(cut.rest, source)
    except (HloParseError, InputError):
        return None  # the careful reader names the mistake, with the text's own line numbers
    if len(modules) != 1:
        return None
    module = modules[0]
    entry = module.entry
    others = [c for c in module.computations.values() if c is not entry]
    if not entry.is_entry or any(entry.name in i.called for c in others for i in c.instructions):
        return None
    return flat_graph(
        cut.body,
        cut.first_line,
        module.name,
        computation_hashes(module, include_entry=False, hasher=interner),
        {c.name for c in others},
        [i.name for i in entry.instructions],
        interner,
    )


def _compiled_rest(
    compiled: ModuleType, rest: str, keys: object
) -> Optional[tuple[str, dict[str, str], list[str]]]:
    """What :func:`text_graph` reads from the text around the entry body, read in C: the module's
    name, the called computations' fingerprints by name and the entry's header parameters; or
    None where the text is not plain (the careful reader then reads it, as before).

    The C side (``scan_rest``) takes the module line, called computations of common lines only,
    and the entry header; each distinct tail is read here by :func:`rest_tail`, and one that
    calls a computation is left to the careful reader (fingerprints of callers need their
    callees' first). The fingerprints are ids in the diff's key table, equal exactly where
    :func:`computation_hashes` gives equal ones.
    """
    module = _MODULE.match(rest[: rest.find("\n")].rstrip() if "\n" in rest else rest.rstrip())
    scan = compiled.scan_rest(rest) if module is not None else None
    if module is None or scan is None:
        return None
    texts: list[Optional[str]] = []
    for tail in map(rest_tail, scan.rests()):
        if tail is None or tail[2]:
            texts.append(None)
        else:
            texts.append(attr_text(tail[1], {}) if tail[1] else "")
    got = scan.hash_computations(keys, texts)
    if got is None:
        return None
    names, prints, _, header_params = got
    return module.group(1), dict(zip(names, prints)), header_params


def diff_texts(
    text_a: str, text_b: str, source_a: str = "", source_b: str = "", pairs: bool = True
) -> Optional[HloDiff]:
    """What :func:`diff_modules` says of the two texts' modules, or None (read them carefully)."""
    from explorer.xla.hlo.diff import diff_graphs

    with paused_gc():
        compiled = kernels.compiled()
        # The compiled reader first, all of the text, then the entry bodies only, then Python;
        # both graphs are read the same way each time (one table of ids), and read again the
        # next way where either is handed back.
        tries: list[tuple[object, bool]] = [(None, False)]
        if compiled is not None:
            tries[:0] = [(compiled.KeyTable(), True), (compiled.KeyTable(), False)]
        for keys, rest_in_c in tries:
            interner = Interner(keys=keys)
            ga = text_graph(text_a, source_a, interner, rest_in_c)
            gb = text_graph(text_b, source_b, interner, rest_in_c) if ga is not None else None
            if ga is not None and gb is not None:
                return diff_graphs(ga, gb, pairs)
        return None


__all__ = ["EntryCut", "cut_entry", "diff_texts", "text_graph"]
