"""Read torch_xla's ``XLA_SAVE_TENSORS_FILE`` (with ``XLA_SAVE_TENSORS_FMT=hlo``) into blocks.

torch_xla appends one block per execution, cached or not: a ``[ScheduleSyncTensorsGraph]``
tag, the Python frames that triggered it, the graph's HLO between ``## BEGIN_GRAPH`` and
``## END_GRAPH``, and its ``Graph Hash:``. So the file alone says which graph ran at every sync
and what its program was, but not whether it was compiled or taken from the cache, nor how
long anything took. The HLO is parsed by :mod:`explorer.xla.hlo`; a truncated or corrupted module
is an error at its line, never a silently shorter graph.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from explorer.xla.hlo import Module, parse_modules

__all__ = ["SaveBlock", "looks_like_save_file", "parse_save_file"]

_TAG = re.compile(r"^\[(\w+)\]\s*$")
_FRAME = re.compile(r"^\s+\S.*\(.*:\d+\)\s*$")


@dataclass
class SaveBlock:
    """One execution as the save file tells it; ``line`` is the 1-based line of its tag."""

    line: int
    tag: str
    frames: list[str] = field(default_factory=list)
    module: Module | None = None

    @property
    def graph_hash(self) -> str:
        return self.module.graph_hash if self.module is not None else ""


def looks_like_save_file(head: str) -> bool:
    """A cheap test on the first kilobytes: a block tag followed by ``TensorsGraphInfo:``."""
    lines = head.lstrip().splitlines()
    return len(lines) > 1 and bool(_TAG.match(lines[0])) and lines[1].startswith("TensorsGraphInfo")


def parse_save_file(text: str, source: str = "") -> list[SaveBlock]:
    """Every block, in file order, each with the module that follows its tag."""
    blocks: list[SaveBlock] = []
    current: SaveBlock | None = None
    in_frames = False
    for n, line in enumerate(text.split("\n"), 1):
        tag = _TAG.match(line)
        if tag:
            current = SaveBlock(n, tag.group(1))
            blocks.append(current)
            in_frames = False
            continue
        if current is None:
            continue
        if line.startswith("TensorsGraphInfo"):
            in_frames = True
        elif in_frames and _FRAME.match(line):
            current.frames.append(line.strip())
        elif in_frames and line.strip():
            in_frames = False
    modules = parse_modules(text, source)
    k = 0
    for module in modules:
        while k + 1 < len(blocks) and blocks[k + 1].line < module.first_line:
            k += 1
        if blocks and blocks[k].line < module.first_line and blocks[k].module is None:
            blocks[k].module = module
    return blocks
