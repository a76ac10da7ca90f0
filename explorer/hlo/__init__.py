"""HLO text: parser, canonical form, structural matcher and diff (pure Python, no torch).

The user story is two 35,000-instruction torch_xla modules that "only have slight
differences, like different order of the parameters": this package says in a second what
changed and where it came from. Importing it never imports torch, torch_xla or plotly.
"""

from explorer.hlo.canonical import canonical_text
from explorer.hlo.diff import diff_modules
from explorer.hlo.errors import HloParseError
from explorer.hlo.fingerprint import module_fingerprint
from explorer.hlo.listing import ModuleInfo, list_modules, near_duplicate_groups, select_module
from explorer.hlo.model import Computation, HloInstruction, Metadata, Module
from explorer.hlo.reader import parse_module, parse_modules, read_modules, read_text
from explorer.hlo.records import (
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
