"""The HLO reader against hostile text: huge numbers, long whitespace and bracket runs, fuzzed.

Every mutated module gives a :class:`Module` or one :class:`HloParseError` with a short
message, in time linear in the text (a 60,000-space header used to take over 120 s in regex
backtracking; 40,000 unclosed ``/*`` took 35-50 s and printed a 120 KB message). The grouping
of ``hlo-list`` is checked against the all-pairs definition it replaced.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.xla.hlo import HloParseError, canonical_text, parse_modules
from explorer.xla.hlo.listing import list_modules, near_duplicate_groups, similarity

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")
SOURCES = [open(os.path.join(DATA, n)).read() for n in ("order_a.hlo.txt", "scalar_save.hlo.txt")]
#: CPU seconds one mutated module may take: the fixtures parse in milliseconds, quadratic ones took
#: minutes. Every bound here is on this thread's CPU time, which other processes on a busy machine
#: do not inflate (wall time would grow with their load, not with the parser's).
BOUND_S = 3.0
SCALE = float(os.environ.get("EXPLORER_FUZZ_SCALE", "1"))


def _settings(n: int) -> settings:
    return settings(
        max_examples=int(n * SCALE),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _check(text: str) -> None:
    start = time.thread_time()
    try:
        modules = parse_modules(text)
    except HloParseError as exc:
        assert exc.line >= 1 and exc.column >= 1
        assert len(str(exc)) <= 700, f"a {len(str(exc))}-character message"
        modules = []
    for m in modules:
        canonical_text(m)
    took = time.thread_time() - start
    assert took < BOUND_S, f"{took:.1f} s for {len(text):,} characters"


NUMBERS = st.one_of(
    st.integers(0, 2**70).map(str),
    st.sampled_from(
        [
            "-1",
            "2147483648",
            "9223372036854775808",
            "1" + "0" * 30,
            "0" * 5000 + "1",
            "1.5",
            "1e400",
        ]
    ),
    st.integers(4000, 6000).map(lambda n: "9" * n),  # beyond int()'s 4,300 digits
)
RUNS = st.tuples(
    st.sampled_from(
        [" ", "\t", "/* ", "(", ")", "{", ",", "%", "[", "a", "9", " ,", "( ", "*/", '"']
    ),
    st.integers(1, 70_000),
).map(lambda t: t[0] * (t[1] // len(t[0]) or 1))


@_settings(300)
@given(st.sampled_from(SOURCES), st.data(), NUMBERS)
def test_numbers_replaced_by_huge_or_odd_ones(source, data, number):
    """Any digit run (parameter numbers, source lines, shapes, literals) replaced by another number."""
    import re

    runs = [m.span() for m in re.finditer(r"\d+", source)]
    a, b = data.draw(st.sampled_from(runs))
    _check(source[:a] + number + source[b:])


@_settings(300)
@given(st.sampled_from(SOURCES), st.data(), RUNS)
def test_long_runs_of_whitespace_and_brackets_inserted(source, data, run):
    i = data.draw(st.integers(0, len(source)))
    _check(source[:i] + run + source[i:])


@_settings(150)
@given(st.sampled_from(SOURCES), st.data(), RUNS)
def test_every_space_of_a_line_widened(source, data, run):
    """Whitespace mutation of a whole line: each separator becomes a long run."""
    lines = source.split("\n")
    k = data.draw(st.integers(0, len(lines) - 1))
    width = data.draw(st.integers(2, 20_000))
    lines[k] = lines[k].replace(" ", " " * width)
    _check("\n".join(lines))


@pytest.mark.parametrize(
    "name, text",
    [
        ("header with 60,000 spaces", "HloModule m\n\nENTRY %main" + " " * 60_000 + "x\n"),
        (
            "parameters with 60,000 spaces",
            "HloModule m\n\n%c (x: f32[]" + " " * 60_000 + ") -> f32[] {\n",
        ),
        (
            "40,000 unclosed comments",
            "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %a = f32[] add("
            + "/* " * 40_000
            + ")\n}\n",
        ),
        (
            "a letter run in a tuple shape",
            "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %t = (f32["
            + "a" * 100_000
            + "]) tuple()\n}\n",
        ),
        (
            "100,000 open parens",
            "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %a = f32[] add(f32[] "
            + "(" * 100_000
            + ")\n}\n",
        ),
        (
            "an attribute then 60,000 spaces",
            "HloModule m\n\nENTRY %e () -> f32[] {\n  ROOT %a = f32[] constant(1), x=a"
            + " " * 60_000
            + "{\n}\n",
        ),
    ],
)
def test_pathological_lines_of_the_issue_parse_in_linear_time(name, text):
    start = time.thread_time()
    with pytest.raises(HloParseError) as caught:
        parse_modules(text)
    assert time.thread_time() - start < 1.0, name
    assert len(str(caught.value)) <= 700


def _fake(profile: Counter) -> SimpleNamespace:
    instructions = [
        SimpleNamespace(opcode=op, shape=shape)
        for (op, shape), n in profile.items()
        for _ in range(n)
    ]
    return SimpleNamespace(computations={"c": SimpleNamespace(instructions=instructions)})


def _all_pairs(modules, threshold):
    """The definition: components of 'similarity >= threshold' over every pair, numbered by first member."""
    profiles = [
        Counter((i.opcode, i.shape) for c in m.computations.values() for i in c.instructions)
        for m in modules
    ]
    parent = list(range(len(modules)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i in range(len(modules)):
        for j in range(i + 1, len(modules)):
            if find(i) != find(j) and similarity(profiles[i], profiles[j]) >= threshold:
                parent[find(j)] = find(i)
    numbers: dict[int, int] = {}
    return [numbers.setdefault(find(i), len(numbers)) for i in range(len(modules))]


ITEMS = [
    ("add", "f32[]"),
    ("multiply", "f32[]"),
    ("add", "f32[2]"),
    ("parameter", "f32[]"),
    ("constant", "s32[]"),
]


@_settings(400)
@given(
    st.lists(st.dictionaries(st.sampled_from(ITEMS), st.integers(1, 6), max_size=5), max_size=30),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 1.0, 1.5]),
)
def test_grouping_equals_the_all_pairs_definition(profiles, threshold):
    modules = [_fake(Counter(p)) for p in profiles]
    assert near_duplicate_groups(modules, threshold) == _all_pairs(modules, threshold)


def _module(i: int, rng: random.Random) -> str:
    n = rng.randint(1, 6)
    dims = rng.choice(["", "2", "3", "2,3", "4"])
    body = [f"  %p{j} = f32[{dims}] parameter({j})" for j in range(n)]
    body.append(f"  ROOT %t = f32[{dims}] add(%p0, %p0)")
    return f"HloModule m{i}\n\nENTRY %main () -> f32[] {{\n" + "\n".join(body) + "\n}\n"


@pytest.mark.slow  # a timing bound over 20,000 modules
def test_listing_20000_tiny_modules_is_near_linear():
    """The issue's case took 38 s (all pairs); grouping is now a small part of reading the file."""
    rng = random.Random(0)
    modules = parse_modules("\n".join(_module(i, rng) for i in range(20_000)))
    start = time.thread_time()
    infos = list_modules(modules)
    assert time.thread_time() - start < 10.0
    assert len(infos) == 20_000 and len({i.group for i in infos}) < 100


@pytest.mark.slow  # a timing bound over 20,000 modules
def test_grouping_20000_similar_modules_does_not_rescan_each_component():
    """Every module shares most items with every other: one component, found without all pairs."""
    modules = [
        _fake(Counter({("c", "f32[]"): 45, **{(f"u{i}_{k}", "f32[]"): 1 for k in range(5)}}))
        for i in range(20_000)
    ]
    start = time.thread_time()
    assert set(near_duplicate_groups(modules)) == {0}
    assert time.thread_time() - start < 10.0
