"""Diffs of real torch_xla module pairs, and the canonical form's invariances."""

from __future__ import annotations

import re

from explorer.xla.hlo import canonical_text, diff_modules, module_fingerprint, parse_module
from tests.hlo.synthetic import planted_pair


def _renumber_params(text: str, mapping: dict[int, int]) -> str:
    """The ENTRY computation's parameters renumbered by ``mapping`` (a called computation's own
    parameters keep their numbers: renumbered, they skipped numbers XLA never skips)."""
    start = text.index("\nENTRY ")
    return text[:start] + re.sub(
        r"parameter\((\d+)\)",
        lambda m: f"parameter({mapping.get(int(m.group(1)), int(m.group(1)))})",
        text[start:],
    )


def test_same_module_is_identical(load):
    (m,) = load("encoder_step2.hlo.txt.gz")
    d = diff_modules(m, m)
    assert d.identical and d.matched_count == d.instructions_a
    assert not d.moved_constants and d.summary.startswith("Same computation")


def test_live_tensor_order_pair_is_a_parameter_permutation(load):
    (a,) = load("order_a.hlo.txt")
    (b,) = load("order_b.hlo.txt")
    d = diff_modules(a, b)
    assert not d.added and not d.removed and d.matched_count == d.instructions_a == d.instructions_b
    perm = {p.index_a: p.index_b for p in d.parameter_permutation}
    assert sorted(perm) == sorted(perm.values()) and perm  # a true permutation, not the identity
    # Renumbering A's parameters by the reported permutation makes it B up to the output order.
    moved = _renumber_params(a.text, perm)
    assert "moved to another position" in d.summary
    d2 = diff_modules(parse_module(moved), b)
    assert not d2.parameter_permutation
    assert [c.kinds for c in d.changed] == [("shape", "operands")]  # only the output tuple order
    assert d.changed[0].name_a == a.entry.root.name


def test_the_summarys_counts_of_moved_parameters_add_up_to_the_whole(load):
    """Four moved parameters of three shapes read "(2 of f32[], 1 of f32[4]{0})": the third
    shape was left out of the count the sentence gives."""
    (a,) = load("order_a.hlo.txt")
    (b,) = load("order_b.hlo.txt")
    d = diff_modules(a, b)
    said = re.search(r"(\d+) parameters of \d+ moved to another position \((.*?)\): ", d.summary)
    assert said is not None, d.summary
    counts = [int(n) for n in re.findall(r"(?:^|, )(\d+) of ", said.group(2))]
    assert sum(counts) == int(said.group(1)) == len(d.parameter_permutation), d.summary


def test_scalar_pair_reports_the_shared_parameter(load):
    a, b = load("scalar_save.hlo.txt")
    d = diff_modules(a, b)
    assert (d.parameters_a, d.parameters_b) == (3, 2)
    removed = [n for g in d.removed for n in g.names]
    assert len(removed) == 1 and a.entry.by_name[removed[0]].opcode == "parameter"
    assert "parameter count changed from 3 to 2" in d.summary


def test_added_computation_is_grouped_by_aten_op_and_line(load):
    mods = load("added_save.hlo.txt")
    d = diff_modules(mods[1], mods[3])
    assert not d.removed and d.added
    assert d.instructions_b - d.instructions_a == sum(g.count for g in d.added)
    assert any(
        g.op_type == "aten__stack"
        and g.source.endswith("make_fixtures.py:" + g.source.rsplit(":", 1)[1])
        for g in d.added
    )
    assert [(t.arity_a, t.arity_b) for t in d.tuple_arity] == [(13, 14)]


def test_first_and_steady_encoder_steps(load):
    (a,) = load("encoder_step1.hlo.txt.gz")
    (b,) = load("encoder_step2.hlo.txt.gz")
    d = diff_modules(a, b)
    assert (d.parameters_a, d.parameters_b) == (29, 54)  # momentum buffers appear as inputs
    added_params = sum(n for g in d.added for op, n in g.opcodes if op == "parameter")
    assert added_params == 25
    assert d.matched_count == d.instructions_a  # step 1 survives whole inside step 2


def test_canonical_text_ignores_renumbering_and_order():
    a, b, _ = planted_pair(3, instructions=3000, permuted=0, moved=0, inserted=0, shuffle=True)
    assert a != b
    assert canonical_text(parse_module(a)) == canonical_text(parse_module(b))
    assert module_fingerprint(parse_module(a)) == module_fingerprint(parse_module(b))


def test_canonical_text_sees_a_permutation():
    a, b, planted = planted_pair(4, instructions=2000, permuted=4, moved=0, inserted=0)
    assert planted.permutation
    assert canonical_text(parse_module(a)) != canonical_text(parse_module(b))
    assert module_fingerprint(parse_module(a)) != module_fingerprint(parse_module(b))


def test_parameters_shifted_by_an_insertion_are_not_called_a_reordering(load):
    """torch_xla's first and steady SGD step: the steady step's graph takes the momentum
    buffers as new parameters, and one old parameter's number moves past them. Its order
    among the matched ones is kept: the summary once said "moved to another position ... so
    this alone recompiles", as it must for a true reordering (the live-tensor pair)."""
    (a,), (b,) = load("encoder_step1.hlo.txt.gz"), load("encoder_step2.hlo.txt.gz")
    d = diff_modules(a, b)
    assert d.parameter_permutation and d.parameter_order_kept
    assert d.parameters_a != d.parameters_b
    assert "shifted position, their order kept" in d.summary
    assert "alone recompiles" not in d.summary
    (a,), (b,) = load("order_a.hlo.txt"), load("order_b.hlo.txt")
    swapped = diff_modules(a, b)
    assert not swapped.parameter_order_kept and "alone recompiles" in swapped.summary
