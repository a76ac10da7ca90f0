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

from typing import NamedTuple, Optional

from explorer.errors import InputError
from explorer.xla.hlo import kernels
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.fingerprint import Interner, computation_hashes
from explorer.xla.hlo.flat_graph import flat_graph
from explorer.xla.hlo.gcpause import paused_gc
from explorer.xla.hlo.graph import Graph
from explorer.xla.hlo.reader import parse_modules
from explorer.xla.hlo.records import HloDiff


class EntryCut(NamedTuple):
    """A module text with its entry body cut out, and that body."""

    rest: str  # the text without the body's lines (the lines after it move up)
    body: str  # the body's lines, without the last newline
    first_line: int  # the 1-based line number of the body's first line in the text


def cut_entry(text: str) -> Optional[EntryCut]:
    """Split off the one entry computation's body, or None when the text is not that simple."""
    if text.count("\nHloModule") + text.startswith("HloModule") != 1:
        return None
    at = text.find("\nENTRY")
    if at < 0 or text.find("\nENTRY", at + 1) >= 0:
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
    return EntryCut(
        text[:start] + text[close + 1 :], text[start:close], text.count("\n", 0, start) + 1
    )


def text_graph(text: str, source: str, interner: Interner) -> Optional[Graph]:
    """The entry graph of a one-module text read by :func:`flat_graph`, or None."""
    cut = cut_entry(text)
    if cut is None:
        return None
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


def diff_texts(
    text_a: str, text_b: str, source_a: str = "", source_b: str = "", pairs: bool = True
) -> Optional[HloDiff]:
    """What :func:`diff_modules` says of the two texts' modules, or None (read them carefully)."""
    from explorer.xla.hlo.diff import diff_graphs

    with paused_gc():
        compiled = kernels.compiled()
        # The compiled reader first (both graphs, one key table); where it hands a text back,
        # both are read again in Python, whose ids are another table's.
        for keys in ([compiled.KeyTable()] if compiled is not None else []) + [None]:
            interner = Interner(keys=keys)
            ga = text_graph(text_a, source_a, interner)
            gb = text_graph(text_b, source_b, interner) if ga is not None else None
            if ga is not None and gb is not None:
                return diff_graphs(ga, gb, pairs)
        return None


__all__ = ["EntryCut", "cut_entry", "diff_texts", "text_graph"]
