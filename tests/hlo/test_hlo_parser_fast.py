"""The one-regex reader of common instruction lines agrees with the careful bracket scanner.

The fast path must accept only lines the careful parser reads the same way, and hand every
other line (tuples, comments, odd spacing, mistakes) to the careful one, so error messages and
results do not depend on which path ran.
"""

from __future__ import annotations

import glob
import os

import pytest

from explorer.xla.hlo import read_text
from explorer.xla.hlo.errors import HloParseError
from explorer.xla.hlo.lines import _parse_careful, parse_common_instruction, parse_hlo_line

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", "hlo")


def _instruction_lines() -> list[str]:
    """Every instruction line of the small fixtures, every 7th of the 35k-instruction pair."""
    out = []
    for path in sorted(glob.glob(os.path.join(DATA, "*.txt*"))):
        lines = [
            line
            for line in read_text(path).split("\n")
            if line.startswith("  ") and " = " in line and not line.strip().startswith("}")
        ]
        out.extend(lines[::7] if "large" in path else lines)
    return out


def test_fast_and_careful_paths_agree_on_real_lines():
    lines = _instruction_lines()
    fast = 0
    for n, line in enumerate(lines):
        got = parse_common_instruction(line, n + 1)
        if got is not None:
            fast += 1
            assert got == _parse_careful(line, n + 1), line[:200]
    # Most real lines take the fast path (else it buys nothing).
    assert fast > 0.9 * len(lines)


@pytest.mark.parametrize(
    "line",
    [
        '  %a.1 = f32[2]{0} add(f32[2]{0} %x, f32[2]{0} %y), metadata={op_type="aten__add" source_line=3}',
        "  %a.1 = f32[2]{0} add(x, y)",
        "  ROOT %t = (f32[], f32[]) tuple(f32[] %x, f32[] %y)",
        "  %g = f32[] get-tuple-element((f32[], f32[]) %t), index=0",
        "  %c = f32[2]{0} constant({1, 2})",
        "  %p = f32[2]{0} parameter(007)",
        "  %r = f32[] reduce(%x, %z), dimensions={0}, to_apply=%Add.3",
        "  %a.1 = f32[2]{0} add(%x /*index=0*/, %y)",
        "  %a.1 = f32[2]{0} add(%x,%y)  ",
        "  %a = f32[2]{0} add( )",
        '  %a = f32[2]{0} add(%x, %y), metadata={op_type="a" op_name="b\\"c}"}',
        '  %a = f32[2]{0} add(%x, %y), metadata={op_type="a"}, sharding={replicated}',
        '  %a = f32[2]{0} add(%x, %y), metadata={op_type="a" source_line=3}  ',
    ],
)
def test_tricky_lines_read_the_same_either_way(line: str):
    assert parse_hlo_line(line, 1) == _parse_careful(line, 1)


@pytest.mark.parametrize(
    "line",
    [
        "  %a = f32[2]{0} add(%x, ), foo=1",
        "  %a = f32[2]{0} add(%x %y)",
        "  %p = f32[] parameter(99999999999)",
        '  %a = f32[2]{0} add(%x), metadata={op_type="x}',
        "  %a = f32[2]{0} add(%x) junk",
    ],
)
def test_bad_lines_get_the_careful_parsers_error(line: str):
    with pytest.raises(HloParseError) as fast:
        parse_hlo_line(line, 7)
    with pytest.raises(HloParseError) as careful:
        _parse_careful(line, 7)
    assert str(fast.value) == str(careful.value)
