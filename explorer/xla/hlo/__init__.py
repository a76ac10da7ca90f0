"""HLO text: parser, canonical form, structural matcher and diff (pure Python, no torch).

The user story is two 35,000-instruction torch_xla modules that "only have slight
differences, like different order of the parameters": this package says in a second what
changed and where it came from. Importing it never imports torch, torch_xla or plotly.
"""

from explorer.xla.hlo.canonical import canonical_text
from explorer.xla.hlo.diff import diff_modules
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.fingerprint import module_fingerprint
from explorer.xla.hlo.listing import ModuleInfo, list_modules, near_duplicate_groups, select_module
from explorer.xla.hlo.model import Computation, HloInstruction, Metadata, Module
from explorer.xla.hlo.reader import parse_module, parse_modules, read_modules, read_text
from explorer.xla.hlo.records import (
    ChangedInstruction,
    HloDiff,
    InstructionGroup,
    MovedConstant,
    ParameterMove,
    TupleArityChange,
)

__all__ = [
    "ChangedInstruction",
    "Computation",
    "HloDiff",
    "HloParseError",
    "HloInstruction",
    "InstructionGroup",
    "Metadata",
    "Module",
    "ModuleInfo",
    "MovedConstant",
    "ParameterMove",
    "TupleArityChange",
    "canonical_text",
    "diff_modules",
    "list_modules",
    "module_fingerprint",
    "near_duplicate_groups",
    "parse_module",
    "parse_modules",
    "read_modules",
    "read_text",
    "select_module",
]
