"""Every size at once, the rewrite rules and the fix search: the pure core of prove-and-repair."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.errors import InputError
from explorer.pipeline.analysis import build, check
from explorer.pipeline.analysis.repair import search_fixes
from explorer.pipeline.analysis.rules import RULES, apply_rules, parse_rules
from explorer.pipeline.analysis.sizes import check_sizes, parse_sizes


def seed(p: int, m: int):
    """DeepSpeed's TrainSchedule with the + 1 removed and the old exchange order (the seed's bug)."""
    return build("deepspeed-train", p, m, buffers="fixed", order="legacy")


@pytest.mark.parametrize(
    "text, stages, mbs",
    [
        ("2-4:1-3", [2, 3, 4], [1, 2, 3]),
        ("4,8,16:1-2", [4, 8, 16], [1, 2]),
        ("3:5", [3], [5]),
        (" 2 - 3 : 7,1 ", [2, 3], [1, 7]),
    ],
)
def test_sizes_parse_ranges_and_lists(text, stages, mbs):
    assert parse_sizes(text) == (stages, mbs)


@pytest.mark.parametrize(
    "text, words",
    [
        ("4-2:1-8", "reversed"),
        ("2-4", "STAGES:MICROBATCHES"),
        ("0-4:1-8", "between 1 and"),
        ("2-4:1-99999", "between 1 and"),
        ("1-256:1-4096", "more than"),
        ("a:1", "not a count"),
        ("2:", "not a count"),
        ("99999999999999999999:1", "between 1 and 256"),  # a count, past the limit
        ("9" * 40 + ":1", "not a count"),  # no one types 40 digits as a count
    ],
)
def test_bad_sizes_say_the_constraint(text, words):
    with pytest.raises(InputError, match=words):
        parse_sizes(text)


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(["1f1b", "gpipe", "zb-h1", "deepspeed-train", "interleaved-1f1b"]),
    legacy=st.booleans(),
    p0=st.integers(1, 6),
    m0=st.integers(1, 10),
)
def test_sweep_verdicts_agree_with_single_checks(kind, legacy, p0, m0):
    def make(p, m):
        if kind == "deepspeed-train":
            return build(kind, p, m, buffers="fixed", order="legacy" if legacy else "fixed")
        return build(kind, p, m, chunks=2 if kind == "interleaved-1f1b" else 1)

    stages, mbs = list(range(p0, p0 + 2)), list(range(m0, m0 + 3))
    sweep = check_sizes(make, stages, mbs)
    assert [(c.stages, c.microbatches) for c in sweep.cells] == [
        (p, m) for p in stages for m in mbs
    ]
    for cell in sweep.cells:
        try:
            report = check(make(cell.stages, cell.microbatches))
        except InputError as exc:
            assert cell.skipped == str(exc)
            continue
        assert cell.ok == report.ok and cell.hazards == len(report.findings.hazards)
        assert cell.deadlocks == int(report.findings.deadlock is not None)
        assert cell.first == (None if report.ok else report.findings.all()[0].to_dict())
        assert cell.allocated == tuple(report.buffers.allocated)
        assert cell.needed == tuple(report.buffers.needed)
        # The sweep simulates its sizes' timelines together; each bubble is the one check gives.
        assert cell.bubble == (report.timeline.bubble.of_total if report.timeline else None)


@pytest.mark.slow  # 352 sizes checked twice (the panel test checks 2-6:1-8 in the fast tier)
def test_the_seeds_smallest_failing_size_is_3_by_3_and_the_fix_is_clean():
    stages, mbs = parse_sizes("2-12:1-32")
    broken = check_sizes(seed, stages, mbs)
    worst = broken.smallest_failing
    assert (worst.stages, worst.microbatches) == (
        3,
        3,
    ) and "SendGrad(buffer_id=0)" in worst.first_words
    assert "smallest failing size: 3 stages x 3 micro-batches" in broken.describe()
    fixed = check_sizes(
        lambda p, m: build("deepspeed-train", p, m, buffers="fixed", order="fixed"), stages, mbs
    )
    assert fixed.smallest_failing is None and fixed.describe().startswith(
        "no hazard, mismatch, deadlock or wrong gradient count at any of 352 sizes"
    )


@pytest.mark.parametrize("p, m", [(2, 1), (3, 3), (4, 8), (7, 5), (9, 16)])
def test_grads_first_on_the_seed_is_deepspeeds_own_fix(p, m):
    ours = apply_rules(seed(p, m), parse_rules("grads-first"))
    theirs = build("deepspeed-train", p, m, buffers="fixed", order="fixed")
    for col in ("rank", "step", "kind", "stage", "microbatch", "buffer"):
        assert np.array_equal(getattr(ours, col), getattr(theirs, col)), col
    assert ours.params["rules"] == ("grads-first",)


@pytest.mark.parametrize("name", list(RULES))
def test_reordering_rules_keep_each_step_s_instructions(name):
    """A rule may reorder within a step or renumber buffers; it never moves work across steps."""
    before = seed(5, 7)
    after = apply_rules(before, [RULES[name]])

    def per_step(s):  # noqa: E306
        return sorted(
            zip(
                s.rank.tolist(),
                s.step.tolist(),
                s.kind.tolist(),
                s.stage.tolist(),
                s.microbatch.tolist(),
            )
        )

    assert per_step(before) == per_step(after)
    assert (after.step[1:] >= after.step[:-1])[
        after.rank[1:] == after.rank[:-1]
    ].all()  # still sorted by step


def test_a_reorder_that_breaks_pairing_is_rejected_with_its_deadlock():
    stages, mbs = parse_sizes("2-6:1-8")
    result = search_fixes(seed, stages, mbs, max_rules=1)
    defer = next(c for c in result.rejected if c.names == ["defer-recv"])
    worst = defer.sweep.smallest_failing
    assert worst.deadlocks == 1 and "deadlock under blocking P2P" in worst.first_words
    assert "defer-recv: fails at 2x2: deadlock" in result.describe()


@pytest.mark.slow  # searches every rule over many sizes
def test_the_fix_search_ranks_deepspeeds_fix_first_with_the_smaller_buffers():
    stages, mbs = parse_sizes("2-8:1-16")
    result = search_fixes(seed, stages, mbs)
    best = result.candidates[0]
    assert best.names == ["grads-first"] and best.proven and best.buffers == (4, 3, 2, 2)
    assert [c.names for c in result.candidates] == [
        ["grads-first"],
        ["buffers+1"],
    ]  # supersets are not new fixes
    text = result.describe()
    assert (
        "+ [2, SendGrad(buffer_id=0), RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]"
        in text
    )
    assert (
        "- [2, RecvActivation(buffer_id=0), SendGrad(buffer_id=0), ForwardPass(buffer_id=0)]"
        in text
    )
    assert (
        "proof: no finding at any of 112 sizes in 2-8:1-16; buffers per stage at 4x8: 4,3,2,2"
        in text
    )
    # Proven over a wider range than the search used.
    wider = check_sizes(lambda p, m: apply_rules(seed(p, m), best.rules), *parse_sizes("2-16:1-48"))
    assert wider.smallest_failing is None and len(wider.checked) == 15 * 48


def test_unknown_or_repeated_rules_are_refused():
    with pytest.raises(InputError, match="unknown rule 'nope'"):
        parse_rules("grads-first,nope")
    with pytest.raises(InputError, match="named twice"):
        parse_rules("parity,parity")
    for typo in (",", "grads-first,", "grads-first,,parity"):  # once read as fewer rules, or none
        with pytest.raises(InputError, match="has an empty rule name"):
            parse_rules(typo)
    assert parse_rules("") == [] and [r.name for r in parse_rules(" parity ")] == ["parity"]


def test_a_sweep_cell_refuses_what_the_single_check_refuses():
    """``check --kind interleaved-1f1b --chunks 8 --stages 200`` is refused (1,600 pipeline
    stages); the sweep's cell at that size once built and checked it anyway."""
    from explorer.errors import InputError
    from explorer.pipeline.runtime.sweep_pool import build_from_job

    make = build_from_job({"kind": "interleaved-1f1b", "chunks": 8})
    with pytest.raises(InputError, match="1,600 pipeline stages, more than the limit"):
        make(200, 200)
    assert make(2, 4).num_stages == 16  # a size within the limits is built as before
