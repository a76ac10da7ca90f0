"""Fuzzing: mutated and truncated real modules give a Module or HloParseError, nothing else.

The default run checks 10,400 cases in about ten seconds; set ``EXPLORER_FUZZ_SCALE=20`` (or
any factor) for a longer run.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.xla.hlo import HloParseError, canonical_text, diff_modules, parse_modules
from explorer.xla.hlo.reader import read_text

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "hlo")


def fixture_path(name: str) -> str:
    return os.path.join(DATA, name)


SCALE = float(os.environ.get("EXPLORER_FUZZ_SCALE", "1"))
SOURCES = [
    read_text(fixture_path(n))
    for n in (
        "order_a.hlo.txt",
        "order_b.hlo.txt",
        "order_a.after_opt.hlo.txt",
        "scalar_save.hlo.txt",
    )
]
SOURCES.append("\n".join(read_text(fixture_path("added_save.hlo.txt")).split("\n")[:140]))
TOKENS = [
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    ",",
    "=",
    "%",
    '"',
    "/*",
    "*/",
    "ROOT ",
    "ENTRY ",
    "HloModule x",
    "f32[2]{0}",
    "token[]",
    "(f32[], s32[])",
    "parameter(0)",
    "\n",
    "}\n",
    "metadata={",
    "to_apply=%x",
    "-",
    ".",
    "0",
    "<=",
    "?",
    " ",
]


#: Each test parses thousands of fuzzed modules: the slow tier.
pytestmark = pytest.mark.slow


def _settings(n: int) -> settings:
    return settings(
        max_examples=int(n * SCALE),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def _check(text: str) -> None:
    try:
        modules = parse_modules(text)
    except HloParseError as exc:
        assert exc.line >= 1 and exc.column >= 1 and isinstance(exc.text, str)
        return
    for m in modules:
        canonical_text(m)
        diff_modules(m, m)


@_settings(2600)
@given(st.sampled_from(SOURCES), st.data())
def test_truncated(source, data):
    cut = data.draw(st.integers(0, len(source)))
    _check(source[:cut])


@_settings(2600)
@given(st.sampled_from(SOURCES), st.data())
def test_deleted_span(source, data):
    i = data.draw(st.integers(0, len(source)))
    j = data.draw(st.integers(i, min(len(source), i + 40)))
    _check(source[:i] + source[j:])


@_settings(2600)
@given(st.sampled_from(SOURCES), st.data())
def test_inserted_token(source, data):
    i = data.draw(st.integers(0, len(source)))
    tok = data.draw(st.sampled_from(TOKENS) | st.text(max_size=3))
    _check(source[:i] + tok + source[i:])


@_settings(2600)
@given(st.sampled_from(SOURCES), st.data())
def test_swapped_lines_and_chars(source, data):
    lines = source.split("\n")
    a = data.draw(st.integers(0, len(lines) - 1))
    b = data.draw(st.integers(0, len(lines) - 1))
    lines[a], lines[b] = lines[b], lines[a]
    text = "\n".join(lines)
    k = data.draw(st.integers(0, len(text)))
    ch = data.draw(st.characters(codec="utf-8"))
    _check(text[:k] + ch + text[k + 1 :])
