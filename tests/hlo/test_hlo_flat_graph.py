"""The diff read straight from text (``diff_texts``) says what the careful reader's diff says.

``explorer hlo-diff A B`` reads two one-module files without a record per entry instruction
(:mod:`explorer.xla.hlo.flat_graph`). It must give the same graph (every column, every
instruction made on demand), the same diff, and hand every text it is not sure of back to the
careful reader (None), never a different answer and never an error of its own.
"""

from __future__ import annotations

import itertools
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.errors import InputError
from explorer.xla.hlo import HloParseError, diff_modules, parse_module, read_text
from explorer.xla.hlo.fingerprint import Interner
from explorer.xla.hlo.graph import Graph, entry_graph
from explorer.xla.hlo.textdiff import cut_entry, diff_texts, text_graph

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")
ONE_MODULE = [
    "order_a.hlo.txt",
    "order_b.hlo.txt",
    "order_a.after_opt.hlo.txt",
    "encoder_step1.hlo.txt.gz",
    "encoder_step2.hlo.txt.gz",
]
LARGE = ["encoder_large_step1.hlo.txt.gz", "encoder_large_step2.hlo.txt.gz"]
COLUMNS = (
    "name parameter_count names opcodes shapes literals numbers metadata lines operands users "
    "file_pos root"
).split()


def _text(name: str) -> str:
    return read_text(os.path.join(DATA, name))


def _first_seen(ids: list[int]) -> list[int]:
    """Ids renumbered by first occurrence: equal lists iff the same ids are equal."""
    seen: dict[int, int] = {}
    return [seen.setdefault(i, len(seen)) for i in ids]


def _same_graph(fast: Graph, careful: Graph) -> None:
    for column in COLUMNS:
        assert getattr(fast, column) == getattr(careful, column), column
    # Fingerprint ids are only compared for equality (the two paths number them in another order).
    assert _first_seen(fast.self_print + fast.subgraph_print) == _first_seen(
        careful.self_print + careful.subgraph_print
    )
    assert len(fast.insts) == len(careful.insts)
    for k in range(len(careful.insts)):
        assert fast.insts[k] == careful.insts[k], k


def _careful_diff(text_a: str, text_b: str):
    """The careful reader's diff, or None where it refuses a text."""
    try:
        return diff_modules(parse_module(text_a), parse_module(text_b))
    except (HloParseError, InputError):
        return None


@pytest.mark.parametrize("name", ONE_MODULE)
def test_every_column_and_instruction_equals_the_careful_graph(name):
    text = _text(name)
    fast = text_graph(text, name, Interner())
    assert fast is not None, "a real one-module file takes the fast path"
    _same_graph(fast, entry_graph(parse_module(text), Interner()))


@pytest.mark.parametrize("a, b", list(itertools.product(ONE_MODULE, repeat=2)))
def test_the_diff_equals_the_careful_diff(a, b):
    got = diff_texts(_text(a), _text(b), a, b)
    assert got is not None
    assert got == diff_modules(parse_module(_text(a)), parse_module(_text(b)))


@pytest.mark.slow
def test_the_large_pair_both_ways():
    a, b = map(_text, LARGE)
    for x, y in ((a, b), (b, a)):
        got = diff_texts(x, y)
        assert got is not None and got == diff_modules(parse_module(x), parse_module(y))
    _same_graph(text_graph(a, "", Interner()), entry_graph(parse_module(a), Interner()))


def test_several_modules_are_left_to_the_careful_reader():
    text = _text("added_save.hlo.txt")
    assert diff_texts(text, text) is None


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: t + "\n" + t,  # two modules
        lambda t: t.replace("\nENTRY", "\n  ENTRY"),  # an entry line the cut does not know
        lambda t: "\n  }".join(t.rsplit("\n}", 1)),  # the entry's close indented
    ],
)
def test_texts_the_cut_does_not_know_are_not_cut(edit):
    assert cut_entry(edit(_text("order_a.hlo.txt"))) is None


def test_the_cut_keeps_the_body_and_its_line_numbers():
    text = _text("order_a.hlo.txt")
    cut = cut_entry(text)
    assert cut is not None
    lines = text.split("\n")
    body = cut.body.split("\n")
    assert lines[cut.first_line - 1 : cut.first_line - 1 + len(body)] == body
    assert lines[cut.first_line - 2].startswith("ENTRY")


def _mutations(text: str) -> st.SearchStrategy[str]:
    """Line-level edits a malformed or unusual body is made of (and character edits)."""
    lines = text.split("\n")
    n = len(lines)
    k = st.integers(0, n - 1)
    return st.one_of(
        k.map(lambda i: "\n".join(lines[:i] + lines[i + 1 :])),  # a line deleted
        k.map(lambda i: "\n".join(lines[: i + 1] + lines[i:])),  # a line doubled
        st.tuples(k, k).map(lambda ij: _swap(lines, *ij)),  # two lines swapped
        k.map(lambda i: "\n".join(lines[:i] + ["  ROOT" + lines[i].lstrip()] + lines[i + 1 :])),
        k.map(lambda i: "\n".join(lines[:i] + [""] + lines[i:])),  # a blank line
        st.tuples(st.integers(0, len(text)), st.sampled_from(list("%,(){}=[] \n"))).map(
            lambda p: text[: p[0]] + p[1] + text[p[0] :]
        ),
        st.tuples(st.integers(0, len(text)), st.integers(1, 30)).map(
            lambda p: text[: p[0]] + text[p[0] + p[1] :]
        ),
    )


def _swap(lines: list[str], i: int, j: int) -> str:
    out = list(lines)
    out[i], out[j] = out[j], out[i]
    return "\n".join(out)


SOURCES = [_text(n) for n in ("order_a.hlo.txt", "order_a.after_opt.hlo.txt", "order_b.hlo.txt")]


@settings(max_examples=400, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_a_mutated_text_gets_the_careful_answer_or_none(data):
    source = data.draw(st.sampled_from(SOURCES))
    other = data.draw(st.sampled_from(SOURCES))
    mutated = data.draw(_mutations(source))
    for a, b in ((mutated, other), (other, mutated)):
        fast = diff_texts(a, b)
        if fast is not None:
            assert fast == _careful_diff(a, b)


@pytest.mark.parametrize("a, b", [ONE_MODULE[3:5], ONE_MODULE[:2]])
def test_the_cli_prints_the_careful_diff_as_json_dumps_would(a, b, capsys):
    from explorer.cli import main

    main(["hlo-diff", os.path.join(DATA, a), os.path.join(DATA, b), "--json"])
    careful = diff_modules(parse_module(_text(a)), parse_module(_text(b)), pairs=False)
    doc = {"ok": careful.identical, **careful.to_json()}  # ok: the exit code's verdict
    assert capsys.readouterr().out == json.dumps(doc, indent=1) + "\n"
