"""The compiled reader and matcher (``explorer/xla/hlo/_kernels.c``) give the Python answers.

``explorer hlo-diff A B`` reads both entry bodies, matches the graphs and reads off the pairs in
C where the module is built (:mod:`explorer.xla.hlo.kernels`). The Python versions are the
oracle: here every committed one-module fixture, a module of unusual lines written for the C
reader's edges, and randomly mutated texts go through both, and the JSON, the graphs (every
column, every instruction) and the matchings must be the same, or both hand the text back to
the careful reader. Bad arguments to the C side are refused with an exception, never a crash.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.errors import InputError
from explorer.json_text import dumps_indented
from explorer.xla.hlo import HloParseError, diff_modules, kernels, parse_module, read_text
from explorer.xla.hlo.diff import pair_facts, pair_facts_python
from explorer.xla.hlo.fingerprint import Interner
from explorer.xla.hlo.graph import Graph, entry_graph
from explorer.xla.hlo.matcher import match, match_python
from explorer.xla.hlo.textdiff import diff_texts, text_graph

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")
ONE_MODULE = [
    "order_a.hlo.txt",
    "order_b.hlo.txt",
    "order_a.after_opt.hlo.txt",
    "encoder_step1.hlo.txt.gz",
    "encoder_step2.hlo.txt.gz",
]
COLUMNS = (
    "name parameter_count names opcodes shapes literals numbers metadata lines operands users "
    "file_pos root"
).split()

# Lines the common-line regex does not read and the careful parser does (tuple shapes, tuple
# operands, index comments, tabs, bare operand names, odd spacing, layouts with parentheses,
# a ROOT named ROOT's user, non-ASCII metadata), beside common ones.
ODD = """HloModule odd.1, entry_computation_layout={(f32[2]{0}, s32[])->(f32[2]{0}, s32[])}

%add.c (x.1: f32[], y.2: f32[]) -> f32[] {
  %x.1 = f32[] parameter(0)
  %y.2 = f32[] parameter(1)
  ROOT %add.3 = f32[] add(f32[] %x.1, f32[] %y.2)
}

ENTRY %odd.1 (p0.1: f32[2], p1.2: s32[]) -> (f32[2], s32[]) {
  %p0.1 = f32[2]{0} parameter(0)
  %p1.2 = s32[] parameter(1)
  %t.3 = (f32[2]{0}, /*index=1*/s32[]) tuple(%p0.1, /*index=1*/%p1.2)
  %g.4 = f32[2]{0} get-tuple-element((f32[2]{0}, s32[]) %t.3), index=0
  %n.5 = ((f32[2]{0}, s32[]), f32[2]{0}) tuple((f32[2]{0}, s32[]) %t.3, f32[2]{0} %g.4)
  %g.6 = (f32[2]{0}, s32[]) get-tuple-element(((f32[2]{0}, s32[]), f32[2]{0}) %n.5), index=0
  %g.7 = f32[2]{0} get-tuple-element(%g.6), index=0
  %a.8 =\tf32[2]{0}\tadd(%g.7, %g.4), metadata={op_type="aten__add" op_name="héllo" source_file="x.py" source_line=3}
  %b.9 = f32[2]{0} add( %a.8 ,%g.4 )
  %c.10 = f32[2]{0} add(a.8, b.9)
  %ROOT = f32[2]{0} multiply(%c.10, %c.10)
  %d.11 = f32[2]{1:T(2)} negate(%ROOT)
  %e.12 = f32[2]{0} negate(f32[2]{1:T(2)} %d.11)
  %k.13 = f32[] constant( 1 )
  %k.14 = f32[2]{0} constant({1,  2})
  %r.15 = f32[] reduce(%e.12, %k.13), dimensions={0}, to_apply=%add.c
  %b.16 = f32[2]{0} broadcast(%r.15), dimensions={}
  %s.17 = f32[2]{0} add(%b.16, %k.14), metadata={op_type="x"}, sharding={replicated}
  ROOT %out.18 = (f32[2]{0}, /*index=1*/s32[]) tuple(%s.17, /*index=1*/%p1.2)
}
"""


def _text(name: str) -> str:
    return read_text(os.path.join(DATA, name))


TEXTS = {name: _text(name) for name in ONE_MODULE} | {"odd": ODD}


def _compiled_and_python(text_a: str, text_b: str):
    """``diff_texts`` of the pair with the compiled module, then in Python."""
    assert kernels.compiled() is not None
    fast = diff_texts(text_a, text_b)
    with kernels.disabled():
        slow = diff_texts(text_a, text_b)
    return fast, slow


def _json(d) -> str:
    return dumps_indented(d.to_json(), indent=1)


def _first_seen(ids: list) -> list[int]:
    seen: dict = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _same_graphs(c: tuple[Graph, Graph], p: tuple[Graph, Graph]) -> None:
    for gc, gp in zip(c, p):
        for column in COLUMNS:
            got, want = getattr(gc, column), getattr(gp, column)
            if isinstance(want, list):  # the compiled graph's may be a sequence over C arrays
                got = list(got)
            assert got == want, column
        assert len(gc.insts) == len(gp.insts)
        for k in range(len(gp.insts)):
            assert gc.insts[k] == gp.insts[k], k
    # ids are compared for equality only, within and across the two graphs of a diff
    ids = [list(g.self_print) + list(g.subgraph_print) for g in c]
    ref = [list(g.self_print) + list(g.subgraph_print) for g in p]
    assert _first_seen(ids[0] + ids[1]) == _first_seen(ref[0] + ref[1])


def _graphs(text_a: str, text_b: str, compiled: bool, rest_in_c: bool = True):
    module = kernels.compiled()
    assert module is not None
    interner = Interner(keys=module.KeyTable() if compiled else None)
    return (
        text_graph(text_a, "a", interner, rest_in_c),
        text_graph(text_b, "b", interner, rest_in_c),
    )


def test_the_kernels_are_built_by_the_install():
    """``make test`` installs with a C compiler: the fast path is what the suite checks."""
    assert kernels.compiled() is not None


def test_the_environment_can_rule_the_kernels_out(monkeypatch):
    monkeypatch.setenv(kernels.NO_KERNELS, "1")
    assert kernels._load() is None
    monkeypatch.setenv(kernels.NO_KERNELS, "0")
    assert kernels._load() is not None


def test_the_odd_module_is_real_hlo_and_read_in_c():
    """The careful reader takes ODD, and the compiled reader reads it (not handed back)."""
    module = parse_module(ODD)
    assert len(module.entry.instructions) == 19
    c = _graphs(ODD, ODD, compiled=True)
    assert c[0] is not None and c[1] is not None
    _same_graphs(c, (entry_graph(module, Interner()), entry_graph(module, Interner())))


@pytest.mark.parametrize("a, b", list(itertools.product(list(TEXTS), repeat=2)))
def test_compiled_and_python_give_the_same_json_and_graphs(a, b):
    fast, slow = _compiled_and_python(TEXTS[a], TEXTS[b])
    assert fast is not None and slow is not None
    assert _json(fast) == _json(slow) and fast == slow
    python = _graphs(TEXTS[a], TEXTS[b], False)
    entry_only = _graphs(TEXTS[a], TEXTS[b], True, rest_in_c=False)
    _same_graphs(entry_only, python)  # the called computations read by the careful reader
    all_in_c = _graphs(TEXTS[a], TEXTS[b], True)
    if all_in_c[0] is not None and all_in_c[1] is not None:  # both texts plain around the entry
        _same_graphs(all_in_c, python)


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_text_around_the_entry_is_read_in_c_as_the_careful_reader_reads_it(name):
    """Module name, entry header parameters, and called-computation fingerprints that are equal
    exactly where ``computation_hashes`` gives equal ones (across two modules, one table)."""
    from explorer.xla.hlo.fingerprint import computation_hashes
    from explorer.xla.hlo.textdiff import _compiled_rest, cut_entry

    module = kernels.compiled()
    assert module is not None
    other = TEXTS["encoder_step1.hlo.txt.gz"]
    keys, interner = module.KeyTable(), Interner()
    got, want = [], []
    for text in (TEXTS[name], other):
        cut = cut_entry(text)
        assert cut is not None
        read = _compiled_rest(module, cut.rest, keys)
        careful = parse_module(cut.rest)
        hashes = computation_hashes(careful, include_entry=False, hasher=interner)
        if read is None:  # not plain: the careful reader reads it (a fixture after XLA passes)
            assert name == "order_a.after_opt.hlo.txt"
            return
        assert read[0] == careful.name
        assert read[2] == [i.name for i in careful.entry.instructions]
        assert set(read[1]) == set(hashes)
        got += [read[1][c] for c in sorted(hashes)]
        want += [hashes[c] for c in sorted(hashes)]
    assert _first_seen(got) == _first_seen(want)


@pytest.mark.parametrize("a, b", [ONE_MODULE[3:5], ONE_MODULE[:2], ["odd", "order_a.hlo.txt"]])
def test_the_compiled_matching_and_pair_facts_are_pythons(a, b):
    ga, gb = _graphs(TEXTS[a], TEXTS[b], True)
    assert ga is not None and gb is not None
    m = match(ga, gb)
    ref = match_python(ga, gb)
    assert (m.a_to_b, m.b_to_a) == (ref.a_to_b, ref.b_to_a)
    assert pair_facts(ga, gb, m) == pair_facts_python(ga, gb, ref)


def test_the_compiled_matcher_takes_graphs_of_the_careful_reader():
    """``match`` runs in C on any graph, not only the compiled reader's (--module, --html)."""
    interner = Interner()
    ga = entry_graph(parse_module(TEXTS["encoder_step1.hlo.txt.gz"]), interner)
    gb = entry_graph(parse_module(TEXTS["encoder_step2.hlo.txt.gz"]), interner)
    m, ref = match(ga, gb), match_python(ga, gb)
    assert (m.a_to_b, m.b_to_a) == (ref.a_to_b, ref.b_to_a)


def _mutations(text: str) -> st.SearchStrategy[str]:
    """Line and character edits, weighted toward what the C reader decides on."""
    lines = text.split("\n")
    k = st.integers(0, len(lines) - 1)
    chars = list("%,(){}=[] \t\n/*:.-_") + ["ROOT ", "/*index=1*/", "é", "\r", "f32[] ", "(s32[]) "]
    return st.one_of(
        k.map(lambda i: "\n".join(lines[:i] + lines[i + 1 :])),
        k.map(lambda i: "\n".join(lines[: i + 1] + lines[i:])),
        st.tuples(k, k).map(lambda ij: _swap(lines, *ij)),
        k.map(lambda i: "\n".join(lines[:i] + ["  ROOT " + lines[i].lstrip()] + lines[i + 1 :])),
        st.tuples(st.integers(0, len(text)), st.sampled_from(chars)).map(
            lambda p: text[: p[0]] + p[1] + text[p[0] :]
        ),
        st.tuples(st.integers(0, len(text)), st.integers(1, 12)).map(
            lambda p: text[: p[0]] + text[p[0] + p[1] :]
        ),
    )


def _swap(lines: list[str], i: int, j: int) -> str:
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return "\n".join(out)


SMALL = [TEXTS[n] for n in ("order_a.hlo.txt", "order_a.after_opt.hlo.txt", "order_b.hlo.txt")]
SMALL.append(ODD)


def _careful(text_a: str, text_b: str):
    try:
        return diff_modules(parse_module(text_a), parse_module(text_b))
    except (HloParseError, InputError):
        return None


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_mutated_text_gets_the_same_answer_both_ways(data):
    """Compiled or not, a mutated text gets the careful reader's answer or is handed back."""
    source = data.draw(st.sampled_from(SMALL))
    other = data.draw(st.sampled_from(SMALL))
    mutated = data.draw(_mutations(source))
    for a, b in ((mutated, other), (other, mutated)):
        fast, slow = _compiled_and_python(a, b)
        if fast is not None:
            careful = _careful(a, b)
            assert careful is not None and fast == careful
            assert _json(fast) == json.dumps(careful.to_json(), indent=1)
        if fast is not None and slow is not None:
            assert _json(fast) == _json(slow)


def test_bad_arguments_are_refused_not_read():
    k = kernels.compiled()
    assert k is not None
    with pytest.raises(TypeError):
        k.scan_body(b"bytes")
    scan = k.scan_body("  %a = f32[] parameter(0)\n  ROOT %b = f32[] negate(%a)")
    assert scan.lines() == 2 and scan.careful([]) == []
    with pytest.raises(ValueError):
        scan.careful([99])
    with pytest.raises(ValueError):  # one attribute text and one value per tail
        scan.build(k.KeyTable(), [], [], [], [])
    assert scan.rests() == [""]  # both lines end at their operand list
    with pytest.raises(ValueError):  # a refused tail: its lines need the careful reading
        scan.build(k.KeyTable(), [None], [], [], [None])
    texts = [""] * len(scan.rests())
    built = scan.build(k.KeyTable(), texts, [], ["a"], ["meta"])
    assert built is not None and list(built[0]) == ["a", "b"] and list(built[5]) == [[], [0]]
    assert built[5][-1] == [0] and len(built[6]) == 2 and list(built[6]) == [[1], []]
    with pytest.raises(IndexError):
        built[5][2]
    assert list(built[12]) == [0, 0] and built[13] == ["meta", "meta"]  # tail index, tail value
    assert (
        scan.build(k.KeyTable(), texts, [], ["nothere"], [0]) is None
    )  # a header parameter lacking
    with pytest.raises(ValueError):  # an operand index out of range
        k.match([0], [0], [0], [0], ["a"], ["a"], [[5]], [[]], [[]], [0], 0, 0, None)
    with pytest.raises(ValueError):  # a root out of range
        k.match([0], [0], [0], [0], ["a"], ["a"], [[]], [[]], [[]], [0], 3, 0, None)
    with pytest.raises(ValueError):  # not one matching
        k.diff_pairs(
            *([0], [1]),
            *([0], [0], [0], [0], ["a"], ["a"], ["s"], ["s"], [""], [""], [None]),
            *([[]], [[]], [[]], [[]], [0], [0]),
        )


def _cli_json(args: list[str], capsys) -> tuple[int, str]:
    from explorer.cli import main

    code = main(args)
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    "a, b",
    [
        ONE_MODULE[3:5],
        ONE_MODULE[:2],
        ["order_a.after_opt.hlo.txt", "order_a.hlo.txt"],
        pytest.param(
            "encoder_large_step1.hlo.txt.gz",
            "encoder_large_step2.hlo.txt.gz",
            marks=pytest.mark.slow,
        ),
    ],
)
def test_the_command_prints_the_same_json_without_the_kernels(a, b, capsys):
    """``explorer hlo-diff A B --json``: the same bytes and exit code from the compiled path and
    from the Python path a machine without a C compiler runs."""
    args = ["hlo-diff", os.path.join(DATA, a), os.path.join(DATA, b), "--json"]
    fast = _cli_json(args, capsys)
    with kernels.disabled():
        slow = _cli_json(args, capsys)
    assert fast == slow and fast[1].startswith("{")
