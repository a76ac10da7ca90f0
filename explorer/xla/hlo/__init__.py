"""HLO text: parser, canonical form, structural matcher and diff (Python, no torch; the diff's
per-instruction loops also in C, :mod:`explorer.xla.hlo.kernels`, where a compiler built them).

The user story is two 35,000-instruction torch_xla modules that "only have slight
differences, like different order of the parameters": this package says in a second what
changed and where it came from. Importing it never imports torch, torch_xla or plotly.
"""

from typing import TYPE_CHECKING

#: Where each public name lives. Names load on first use (PEP 562), so a command that needs
#: the reader and the diff does not pay for the canonical printer, the listing or blake2b.
_HOME = {
    "canonical_text": "canonical",
    "diff_modules": "diff",
    "HloParseError": "errors",
    "module_fingerprint": "fingerprint",
    "ModuleInfo": "listing",
    "list_modules": "listing",
    "near_duplicate_groups": "listing",
    "select_module": "listing",
    "Computation": "model",
    "HloInstruction": "model",
    "Metadata": "model",
    "Module": "model",
    "parse_module": "reader",
    "parse_modules": "reader",
    "read_modules": "reader",
    "read_text": "reader",
    "ChangedInstruction": "records",
    "HloDiff": "records",
    "InstructionGroup": "records",
    "MovedConstant": "records",
    "ParameterMove": "records",
    "TupleArityChange": "records",
}

if TYPE_CHECKING:  # what the type checker and readers see; at run time __getattr__ loads them
    from explorer.xla.hlo.canonical import canonical_text
    from explorer.xla.hlo.diff import diff_modules
    from explorer.xla.hlo.errors import HloParseError
    from explorer.xla.hlo.fingerprint import module_fingerprint
    from explorer.xla.hlo.listing import (
        ModuleInfo,
        list_modules,
        near_duplicate_groups,
        select_module,
    )
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


def __getattr__(name: str):
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


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
