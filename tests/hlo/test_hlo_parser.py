"""The parser reads what torch_xla and XLA really print, and says where malformed text breaks."""

from __future__ import annotations

import pytest

from explorer.xla.hlo import HloParseError, parse_module, parse_modules
from explorer.xla.hlo.model import tuple_arity

SMALL = """HloModule m.1, entry_computation_layout={(f32[2]{0})->(f32[2]{0}, s32[])}

%add_c (x: f32[], y: f32[]) -> f32[] {
  ROOT %r = f32[] add(f32[] %x, f32[] %y)
}

ENTRY %main.9 (p0.1: f32[2], p1.2: (f32[], /*index=1*/s32[])) -> (f32[2], s32[]) {
  %p0.1 = f32[2]{0} parameter(0), sharding={replicated}
  %p1.2 = (f32[], s32[]) parameter(1)
  %gte.3 = s32[] get-tuple-element((f32[], /*index=1*/s32[]) %p1.2), index=1
  %c.4 = f32[<=4,?]{1,0} constant({ {1, 2}, {3, 4} }), metadata={op_type="aten__sum" op_name="aten__sum.7/aten__sum" source_file="a, {b}.py" source_line=12}
  %tok.5 = token[] after-all()
  %red.6 = f32[] reduce(p0.1, c.4), dimensions={0}, to_apply=%add_c, replica_groups={{0,1},{2,3}}
  ROOT %t.7 = (f32[2]{0}, s32[]) tuple(f32[2]{0} %p0.1, s32[] %gte.3)
}
"""


def test_small_module_fields():
    m = parse_module(SMALL)
    assert (
        m.name == "m.1" and m.entry.name == "main.9" and set(m.computations) == {"add_c", "main.9"}
    )
    add_c = m.computations["add_c"]
    assert [p.name for p in add_c.parameters] == ["x", "y"]  # implicit, from the header
    e = m.entry.by_name
    assert e["gte.3"].operands == ("p1.2",) and e["gte.3"].attr("index") == "1"
    assert e["p1.2"].shape == "(f32[], s32[])" and tuple_arity(e["p1.2"].shape) == 2
    assert e["c.4"].literal == "{ {1, 2}, {3, 4} }" and e["c.4"].shape == "f32[<=4,?]{1,0}"
    md = e["c.4"].metadata
    assert (md.op_type, md.op_name, md.source_file, md.source_line) == (
        "aten__sum",
        "aten__sum.7/aten__sum",
        "a, {b}.py",
        12,
    )
    assert e["tok.5"].shape == "token[]" and e["tok.5"].operands == ()
    assert e["red.6"].operands == ("p0.1", "c.4") and e["red.6"].called == ("add_c",)
    assert e["red.6"].attr("replica_groups") == "{{0,1},{2,3}}"
    assert e["p0.1"].attr("sharding") == "{replicated}" and e["p0.1"].parameter_number == 0
    assert m.entry.root is e["t.7"] and m.parameter_count == 2


def test_torch_xla_save_file(load):
    mods = load("scalar_save.hlo.txt")
    assert [m.parameter_count for m in mods] == [3, 2]  # a*0.5 + a*0.25, then a*0.5 + a*0.5
    assert all(len(m.graph_hash) == 32 for m in mods)
    params = [i for i in mods[0].entry.instructions if i.opcode == "parameter"]
    assert all(p.metadata.op_type == "xla__device_data" and p.metadata.source_line for p in params)


def test_xla_dump_bare_operands_and_after_optimizations(load):
    (m,) = load("order_a.hlo.txt")
    assert m.entry.by_name["multiply.4"].operands == ("p1.2", "broadcast.3")
    (opt,) = load("order_a.after_opt.hlo.txt")
    fusions = [i for c in opt.computations.values() for i in c.instructions if i.opcode == "fusion"]
    assert fusions and all(f.called and f.called[0] in opt.computations for f in fusions)


def test_large_real_module(load):
    (m,) = load("encoder_step2.hlo.txt.gz")
    assert m.instruction_count > 1000 and m.parameter_count == 54
    roots = [c.root for c in m.computations.values()]
    assert all(r is not None for r in roots)
    assert tuple_arity(m.entry.root.shape) == len(m.entry.root.operands)


@pytest.mark.parametrize(
    "bad, line, needle",
    [
        ("", 1, "no 'HloModule'"),
        ("HloModule m\n", 1, "no computations"),
        ("HloModule m\nENTRY %e {\n  %a = f32[] constant(1)\n", 2, "not closed"),
        ("HloModule m\nENTRY %e {\n  %a = f32[ constant(1)\n}\n", 3, "expected a shape"),
        ("HloModule m\nENTRY %e {\n  %a = f32[] add(%b, %c)\n}\n", 3, "not defined"),
        ("HloModule m\nENTRY %e {\n  %a = f32[] add(%a, %a)\n}\n", 3, "cycle"),
        ("HloModule m\nENTRY %e {\n  %a = f32[] parameter(x)\n}\n", 3, "parameter number"),
        (
            'HloModule m\nENTRY %e {\n  %a = f32[] constant(1), metadata={op_name="x}\n}\n',
            3,
            "unterminated",
        ),
        ("HloModule m\nENTRY %e {\n  %a = f32[] reduce(), to_apply=%nope\n}\n", 3, "not in module"),
        (
            "HloModule m\nENTRY %e {\n  %a = f32[] constant(1)\n  %a = f32[] constant(2)\n}\n",
            4,
            "defined twice",
        ),
    ],
)
def test_malformed_input_names_line_and_text(bad, line, needle):
    with pytest.raises(HloParseError) as err:
        parse_modules(bad, "x.hlo")
    assert err.value.line == line and needle in str(err.value)
    assert str(err.value).startswith(f"x.hlo:{line}:")


def test_error_column_points_at_the_bad_character():
    with pytest.raises(HloParseError) as err:
        parse_modules("HloModule m\nENTRY %e {\n  %a = f32[] constant(1), =oops\n}\n")
    assert err.value.column == len("  %a = f32[] constant(1)") + 1
    assert "constant(1), =oops" in err.value.text
